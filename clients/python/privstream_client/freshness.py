"""Fresh releases only: the deployment a subscriber follows and the newest release it holds per level.

A signature proves which key signed a release, not that the release is the newest, nor that it
is this deployment's: a replay of an old release verifies, and so does a release of another
deployment that shares the key (a staging worker mounting production's key). So a subscriber
keeps, per stream, :class:`Freshness`:

* **the deployment** (its ledger id): pinned (``ledger_id=``), else the one ``/keys`` states
  signed (:class:`~privstream_client.signing.DeploymentStatement`), else the first verified
  release that names one (and kept in the state file). A release of another ledger is refused
  (``foreign_deployment``) and changes nothing the subscriber holds, so it cannot freeze it.
* **per level, the newest release taken**: a release of that level is taken only if it is newer
  (else ``stale``), judged on signed fields only: within one window family (the ``window_id``
  without its ``-L{level}-{index}`` end) by the node's last window, which grows with every node
  of a level; across families (a new state store's count windows) by ``publication.scheduled_at``.
  A release carrying neither is taken (nothing to order it by).

:class:`StateFile` keeps the marks (and the positions read) across subscriber restarts, written
atomically (a new file renamed over the old one).

>>> from privstream_client.release import EXAMPLE, Release
>>> def node(last, ledger="aa"):
...     c = {**EXAMPLE["certificate"], "ledger_id": ledger, "window": {"window_id": f"f-c4-L0-{last}",
...          "kind": "count", "first_window": last, "last_window": last}}
...     return Release.from_json({**EXAMPLE, "certificate": c})
>>> fresh = Freshness()
>>> [fresh.judge(r) for r in (node(0), node(1), node(0), node(2, ledger="bb"), node(2))]
[None, None, 'stale', 'foreign_deployment', None]
>>> fresh.ledger_id, fresh.held[0].last_window
('aa', 2)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the release module chooses releases with this one
    from privstream_client.release import Release

__all__ = ["FRESHNESS_PROBLEMS", "Freshness", "Held", "StateFile", "StateFileError"]

#: Why a verified release is refused as not fresh (keys of ``Subscription.skipped``).
FRESHNESS_PROBLEMS = ("foreign_deployment", "stale")

_NODE_SUFFIX = re.compile(r"-L\d+-\d+$")


class StateFileError(ValueError):
    """A subscriber's state file that cannot be used (unreadable, or another deployment's)."""


@dataclass(frozen=True)
class Held:
    """The newest release a subscriber took of one level: what a later one must be newer than."""

    digest: str
    family: str | None = None
    last_window: int | None = None
    published_at: float | None = None  # Unix seconds of the signed publication.scheduled_at

    @classmethod
    def of(cls, release: Release, digest: str) -> Held:
        window = release.certificate.window
        family = None if window is None else _NODE_SUFFIX.sub("", window.window_id)
        published = release.published_at
        return cls(
            digest=digest,
            family=family,
            last_window=release.last_window,
            published_at=None if published is None else published.timestamp(),
        )

    def newer(self, other: Held) -> bool:
        """Whether this release is newer than ``other`` (of the same level); True if nothing orders them."""
        same_family = self.family is not None and self.family == other.family
        if same_family and self.last_window is not None and other.last_window is not None:
            return self.last_window > other.last_window
        if self.published_at is not None and other.published_at is not None:
            return self.published_at > other.published_at
        return True


class Freshness:
    """One stream's deployment and newest release per level (the module docstring)."""

    def __init__(self, ledger_id: str | None = None):
        self.ledger_id = ledger_id
        self.held: dict[int, Held] = {}

    def judge(self, release: Release, digest: str | None = None) -> str | None:
        """None if ``release`` (not seen before) is fresh, and it is then held; else why not
        (:data:`FRESHNESS_PROBLEMS`), and nothing changes."""
        mark = Held.of(release, digest or release.digest())
        return self.judge_mark(release.level, mark, release.certificate.ledger_id)

    def judge_mark(self, level: int, mark: Held, ledger_id: str | None) -> str | None:
        """:meth:`judge` on a release's level, mark and claimed ledger id."""
        if self.ledger_id is not None and ledger_id != self.ledger_id:
            return "foreign_deployment"
        held = self.held.get(level)
        if held is not None and not mark.newer(held):
            return "stale"
        if self.ledger_id is None and ledger_id is not None:
            self.ledger_id = ledger_id  # the first verified release that names its deployment
        self.held[level] = mark
        return None

    def holds(self, level: int, digest: str) -> bool:
        """Whether the release ``digest`` is the one held for ``level`` (a re-publication of it)."""
        held = self.held.get(level)
        return held is not None and held.digest == digest

    def to_dict(self) -> dict[str, Any]:
        held = {str(level): asdict(mark) for level, mark in sorted(self.held.items())}
        return {"ledger_id": self.ledger_id, "held": held}

    def restore(self, data: dict[str, Any]) -> None:
        """Take the deployment and the marks a state file kept; ``StateFileError`` if it names
        another deployment than the pinned one."""
        kept = data.get("ledger_id")
        if kept is not None and self.ledger_id is not None and kept != self.ledger_id:
            pinned = self.ledger_id
            raise StateFileError(f"holds releases of ledger {kept}, not of the pinned ledger {pinned}"[:300])
        self.ledger_id = self.ledger_id or kept
        for level, held in dict(data.get("held") or {}).items():
            self.held[int(level)] = Held(**held)


class StateFile:
    """A subscriber's marks on disk, per subscription (topic and stream): its :class:`Freshness`
    and the next offset to read of each partition. Saved atomically; a missing file is empty."""

    VERSION = 1

    def __init__(self, path: Path | str, topic: str, stream_id: str):
        self.path = Path(path)
        self.name = f"{topic}/{stream_id}"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {"version": self.VERSION, "subscriptions": {}}
        except (OSError, ValueError) as exc:
            raise StateFileError(f"cannot read the subscriber state file {self.path}: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != self.VERSION:
            raise StateFileError(f"{self.path} is not a version-{self.VERSION} subscriber state file")
        return data

    def load(self, freshness: Freshness) -> dict[int, int]:
        """Restore ``freshness`` from the file; the next offset of each partition it records."""
        entry = self._read().get("subscriptions", {}).get(self.name)
        if not entry:
            return {}
        try:
            freshness.restore(entry)
            return {int(p): int(o) for p, o in dict(entry.get("positions") or {}).items()}
        except StateFileError as exc:
            raise StateFileError(f"the subscriber state file {self.path} {exc}") from None
        except (TypeError, ValueError) as exc:
            raise StateFileError(f"the subscriber state file {self.path} is damaged: {exc}") from None

    def save(self, freshness: Freshness, positions: dict[int, int]) -> None:
        """Write the marks and positions: a crash leaves the old file or the new one, never half."""
        data = self._read()
        data.setdefault("subscriptions", {})[self.name] = {
            **freshness.to_dict(),
            "positions": {str(p): o for p, o in sorted(positions.items())},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
