"""Headless Chromium driven over the Chrome DevTools Protocol: a websocket (aiohttp's client, already
installed with faust), no WebDriver and no browser download.

The browser runs as a child process in its own process group with a fresh profile in the test's
temporary folder; :meth:`Browser.close` ends that group. Everything the page reports as an error
is collected: ``console.error`` calls, uncaught exceptions, and the browser's own error log
(failed loads, 404s of assets, blocked requests).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

from privstream.stream_app.embedded.broker import die_with_parent

#: Flags for headless Chromium as root in a container: no sandbox (root), no GPU, nothing that
#: reaches the network on its own, a shared-memory-light renderer.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
)


class Browser:
    def __init__(self, binary: str, workdir: Path):
        self.binary = binary
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None
        self.errors: list[str] = []  # what the page reported as errors, in order
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def start(self, timeout: float = 60.0) -> Browser:
        profile = self.workdir / "profile"
        profile.mkdir(parents=True, exist_ok=True)
        with open(self.workdir / "chromium.log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    *FLAGS,
                    f"--user-data-dir={profile}",
                    "--remote-debugging-address=127.0.0.1",
                    "--remote-debugging-port=0",
                    "--window-size=1200,1700",
                    "about:blank",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        port_file = profile / "DevToolsActivePort"  # Chromium writes its debugging port here
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.process.poll() is not None or loop.time() > deadline:
                log_text = (self.workdir / "chromium.log").read_text(errors="replace")[-3000:]
                await self.close()
                raise AssertionError(f"Chromium did not start:\n{log_text}")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json(content_type=None)
        (page,) = [t for t in targets if t["type"] == "page"]
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime", "Log"):
            await self.send(f"{domain}.enable")
        await self.send(
            "Emulation.setDeviceMetricsOverride", width=1200, height=1700, deviceScaleFactor=1, mobile=False
        )
        return self

    async def _read(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                break
            data = json.loads(message.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
                continue
            self._collect_error(data.get("method", ""), data.get("params", {}))

    def _collect_error(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.errors.append(f"console.{params['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            exception = details.get("exception", {})
            self.errors.append("uncaught: " + exception.get("description", details.get("text", "")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result (an error answer raises)."""
        assert self._ws is not None
        call_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        await self._ws.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
        answer = await asyncio.wait_for(future, 30)
        if "error" in answer:
            raise AssertionError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    async def open(self, url: str, timeout: float = 30.0) -> None:
        """Navigate and wait until that document has loaded (scripts run, load event fired)."""
        await self.send("Page.navigate", url=url)
        await self.wait_for(
            f"location.href === {json.dumps(url)} && document.readyState === 'complete'",
            timeout,
            f"{url} to load",
        )

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float, what: str) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if loop.time() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} ({expression})")
            await asyncio.sleep(0.25)

    async def screenshot(self, path: Path) -> Path:
        result = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(result["data"]))
        return path

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)  # the group we started: the browser's helpers too
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
