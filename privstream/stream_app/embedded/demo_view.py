"""What ``privstream demo`` shows: the live progress line while the worker learns, and the summary
it prints at the end."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["DEMO_STREAM", "FRESH_EXAMPLES", "REALIZABLE_WORD", "ProgressView", "summary_text"]

#: The demo's one stream.
DEMO_STREAM = "demo"
#: Fresh examples of the demo's target on which the last release's error is measured.
FRESH_EXAMPLES = 10_000


def summary_text(summary: dict[str, Any]) -> str:
    """The demo's summary (the dict ``Demo.run`` returns) for people, a few lines.

    >>> print(summary_text({"examples": 10, "processed": 10, "mistakes": 2, "mistake_bound": 6,
    ...     "realizable": True, "invalid": 0, "releases": 1, "refusals": 0, "epsilon_spent": 1.0,
    ...     "epsilon_budget": 10.0, "last_release_error": 0.0123, "hypothesis_class": "thresholds:64",
    ...     "label_noise": 0.0}))
    learned 10 of 10 examples online (thresholds:64): 2 SOA mistakes, bound 6 (realizable)
    0 invalid messages (in the dead-letter topic)
    1 private releases, 0 refused: ε spent 1 of 10 per example (lifetime)
    the last release errs on 1.23% of 10,000 fresh examples
    """
    realizable = {
        True: "realizable",
        False: "not realizable: the bound holds only for clean labels",
        None: "unknown",
    }[summary["realizable"]]
    learner = summary.get("online_learner") or "SOA"
    if summary.get("online_learner"):
        realizable = {
            True: f"separable with margin {summary.get('margin')}: within the bound",
            False: "more than the bound: no halfspace has that margin on the stream",
            None: "no margin test",
        }[summary["realizable"]]
    lines = [
        f"learned {summary['processed']} of {summary['examples']} examples online "
        f"({summary['hypothesis_class']}): {summary['mistakes']} {learner} mistakes, "
        f"bound {summary['mistake_bound']} ({realizable})",
        f"{summary['invalid']} invalid messages (in the dead-letter topic)",
        f"{summary['releases']} private releases, {summary['refusals']} refused: "
        f"ε spent {summary['epsilon_spent']:g} of {summary['epsilon_budget']:g} per example (lifetime)",
    ]
    if summary.get("releases_per_level"):
        levels = sorted(summary["releases_per_level"].items(), key=lambda item: int(item[0]))
        lines.append("releases per level of the tree: " + ", ".join(f"L{j}: {n}" for j, n in levels))
    error = summary["last_release_error"]
    lines.append(
        "no release was published"
        if error is None
        else f"the last release errs on {error:.2%} of {FRESH_EXAMPLES:,} fresh examples"
    )
    best, level0 = summary.get("best_release_error"), summary.get("last_level0_release_error")
    if best is not None and level0 is not None:
        lines.append(
            f"the best release (level {summary['best_release_level']}) errs on {best:.2%}, "
            f"the last level-0 release on {level0:.2%}"
        )
    return "\n".join(lines)


#: The progress line's word for a stream's ``realizable`` (None: the online learner has no test).
REALIZABLE_WORD = {True: "yes", False: "NO", None: "n/a"}


class ProgressView:
    """One updating line on a terminal; a line every few seconds otherwise.

    The rate is the examples learned since the producer started (:meth:`producing`) over the time
    since then, so the first line that shows examples shows the rate they were learned at.

    >>> import io
    >>> out, clock = io.StringIO(), iter([0.0, 10.0, 12.0, 14.0])
    >>> view = ProgressView(20000, out, clock=lambda: next(clock))
    >>> view.producing()
    >>> view.show({"streams": {"demo": {"examples": 20000, "mistakes": 4, "mistake_bound": 16}}})
    >>> print(out.getvalue().strip())
    examples 20000/20000  mistakes 4/16 (bound)  realizable yes  invalid 0  releases 0 (ε 0/0)  2,000 ex/s
    """

    def __init__(self, total: int, stream: Any = sys.stderr, clock: Callable[[], float] = time.monotonic):
        self.total = total
        self.stream = stream
        self.tty = stream.isatty()
        self.clock = clock
        self._started_at: float | None = None
        self._last_line_at = -math.inf
        self._last_line = ""

    def producing(self) -> None:
        """The producer starts sending: the rate counts from now."""
        self._started_at = self.clock()

    def show(self, status: dict[str, Any] | None, final: bool = False) -> None:
        now = self.clock()
        if not self.tty and not final and now - self._last_line_at < 2.0:
            return
        self._last_line_at = now
        s = (status or {}).get("streams", {}).get(DEMO_STREAM, {})
        done = s.get("examples", 0)
        if status is None:
            line = "waiting for the worker to start..."
        elif done == 0 and not final:
            line = "worker up; joining the consumer group (a few seconds)..."
        else:
            t0 = now if self._started_at is None else self._started_at
            rate = done / (now - t0) if now > t0 else 0.0
            budget = status.get("budget") or {}
            bound = "?" if s.get("mistake_bound") is None else s["mistake_bound"]
            line = (
                f"examples {done}/{self.total}  mistakes {s.get('mistakes', 0)}/{bound} (bound)  "
                f"realizable {REALIZABLE_WORD[s.get('realizable', True)]}  "
                f"invalid {status.get('invalid', 0)}  releases {budget.get('releases', 0)} "
                f"(ε {budget.get('lifetime_epsilon_spent', 0):g}"
                f"/{budget.get('lifetime_epsilon_budget', 0):g})"
                f"  {rate:,.0f} ex/s"
            )
        if line == self._last_line and not self.tty:
            return
        self._last_line = line
        if self.tty:
            self.stream.write("\r" + line.ljust(100) + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
