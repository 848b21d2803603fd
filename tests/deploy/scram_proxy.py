"""A SASL/SCRAM-authenticating (and optionally TLS-terminating) TCP proxy in front of a PLAINTEXT
Kafka broker (a test double).

Why it exists: the embedded Tansu binary implements SCRAM (``--authentication``), but a user can
never be created on an authenticating broker: ``tansu user create`` sends AlterUserScramCredentials
without authenticating, which such a broker refuses (``NotAuthenticated``), and the memory engine
keeps credentials only in that broker's memory (nothing survives to a second, authenticating
broker). tests/deploy/test_kafka_security.py shows both with the binary itself. To run our
clients' SCRAM for real end to end, this proxy plays the broker's part of SASL:

* it answers SaslHandshake (v0/v1) and SaslAuthenticate (v0/v1) itself, running the server side of
  SCRAM-SHA-256/512 (RFC 5802 §3, §5: salted password by PBKDF2, proof = ClientKey XOR
  HMAC(StoredKey, AuthMessage), server signature in the final message) against its own users;
* it forwards ApiVersions (allowed before authentication, as in Kafka) to the broker;
* it refuses anything else before authentication by closing the connection, as Kafka does, and
  answers a bad proof with SASL_AUTHENTICATION_FAILED (58) and Kafka's message, then closes;
* once authenticated it pipes bytes both ways.

With ``server_ssl`` the proxy speaks TLS to its clients (the embedded binary cannot: its
``broker --cert`` refuses to be combined with ``--key``, and ``--cert`` alone serves no TLS); with
``users=None`` it does no SASL and only pipes bytes. The broker must advertise the proxy's address
(``EmbeddedBroker(advertised_port=...)``) so that clients come back through the proxy after
reading metadata.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import ssl
import struct
import threading
from dataclasses import dataclass

from privstream.stream_app.embedded.broker import LOOPBACK, free_port

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
ITERATIONS = 4096


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


@dataclass
class _Scram:
    """The server side of one SCRAM exchange (RFC 5802)."""

    mechanism: str
    users: dict[str, str]
    client_first_bare: str = ""
    server_first: str = ""
    nonce: str = ""
    salted: bytes = b""

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, HASHES[self.mechanism]).digest()

    def first(self, message: str) -> str:
        gs2, _, bare = message.partition(",,")  # "n,," : no channel binding, no authzid
        if gs2 != "n":
            raise ValueError("unsupported GS2 header")
        fields = dict(part.split("=", 1) for part in bare.split(","))
        user = fields["n"].replace("=2C", ",").replace("=3D", "=")
        # An unknown user gets a made-up salt and fails at the proof, as in Kafka (no user oracle).
        password = self.users.get(user, secrets.token_hex(16))
        salt = secrets.token_bytes(16)
        self.salted = hashlib.pbkdf2_hmac(HASHES[self.mechanism], password.encode(), salt, ITERATIONS)
        self.client_first_bare = bare
        self.nonce = fields["r"] + secrets.token_hex(12)
        self.server_first = f"r={self.nonce},s={base64.b64encode(salt).decode()},i={ITERATIONS}"
        return self.server_first

    def final(self, message: str) -> str | None:
        """The server-final message, or None when the proof is wrong."""
        without_proof, _, proof = message.rpartition(",p=")
        fields = dict(part.split("=", 1) for part in without_proof.split(","))
        if fields.get("r") != self.nonce or fields.get("c") != "biws":
            return None
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        client_key = self._hmac(self.salted, b"Client Key")
        stored_key = hashlib.new(HASHES[self.mechanism], client_key).digest()
        signature = self._hmac(stored_key, auth_message)
        expected = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if not hmac.compare_digest(base64.b64decode(proof), expected):
            return None
        server_key = self._hmac(self.salted, b"Server Key")
        return "v=" + base64.b64encode(self._hmac(server_key, auth_message)).decode()


class ScramProxy:
    """The proxy on ``127.0.0.1:<port>``, served from a background thread.

    >>> proxy = ScramProxy(("127.0.0.1", 9092), {"alice": "s3cret"})   # doctest: +SKIP
    >>> proxy.start().port
    """

    def __init__(
        self,
        backend: tuple[str, int],
        users: dict[str, str] | None,
        port: int | None = None,
        server_ssl: ssl.SSLContext | None = None,
    ):
        self.backend = backend
        self.users = dict(users) if users is not None else None
        self.port = port or free_port()
        self.server_ssl = server_ssl
        self.authenticated: list[str] = []  # user names, one per successful exchange
        self.failures = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    def start(self) -> ScramProxy:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the SCRAM proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> ScramProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, LOOPBACK, self.port, ssl=self.server_ssl)
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        backend: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            scram: _Scram | None = None
            while self.users is not None:
                frame = await _read_frame(reader)
                api_key, version, correlation_id = struct.unpack(">hhi", frame[:8])
                (client_len,) = struct.unpack(">h", frame[8:10])
                body = frame[10 + max(client_len, 0) :]
                head = struct.pack(">i", correlation_id)
                if api_key == API_VERSIONS:
                    if backend is None:
                        backend = await asyncio.open_connection(*self.backend)
                    backend[1].write(struct.pack(">i", len(frame)) + frame)
                    await backend[1].drain()
                    answer = await _read_frame(backend[0])
                    writer.write(struct.pack(">i", len(answer)) + answer)
                elif api_key == SASL_HANDSHAKE and version <= 1:
                    (length,) = struct.unpack(">h", body[:2])
                    mechanism = body[2 : 2 + length].decode()
                    error = 0 if mechanism in HASHES else UNSUPPORTED_SASL_MECHANISM
                    scram = _Scram(mechanism, self.users) if error == 0 else None
                    enabled = struct.pack(">i", len(HASHES)) + b"".join(_string(m) for m in HASHES)
                    payload = head + struct.pack(">h", error) + enabled
                    writer.write(struct.pack(">i", len(payload)) + payload)
                elif api_key == SASL_AUTHENTICATE and version <= 1 and scram is not None:
                    (length,) = struct.unpack(">i", body[:4])
                    message = body[4 : 4 + length].decode()
                    tail = struct.pack(">q", 0) if version == 1 else b""
                    if not scram.server_first:
                        answer, error, text = scram.first(message), 0, None
                    else:
                        final = scram.final(message)
                        if final is None:
                            answer, error = "", SASL_AUTHENTICATION_FAILED
                            text = (
                                "Authentication failed during authentication due to invalid "
                                f"credentials with SASL mechanism {scram.mechanism}"
                            )
                        else:
                            answer, error, text = final, 0, None
                    payload = head + struct.pack(">h", error) + _string(text) + _bytes(answer.encode()) + tail
                    writer.write(struct.pack(">i", len(payload)) + payload)
                    await writer.drain()
                    if error:
                        self.failures += 1
                        return  # Kafka closes the connection after a failed authentication
                    if scram.server_first and answer.startswith("v="):
                        user = scram.client_first_bare.split(",")[0][2:]
                        self.authenticated.append(user)
                        break
                else:
                    return  # anything else before authentication: close, as Kafka does
                await writer.drain()
            if backend is None:
                backend = await asyncio.open_connection(*self.backend)
            await asyncio.gather(_pipe(reader, backend[1]), _pipe(backend[0], writer))
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, ValueError, KeyError):
            pass
        finally:
            writer.close()
            if backend is not None:
                backend[1].close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.close()
