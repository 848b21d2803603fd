"""The natural order of released values, where they have one.

Released keys (histogram bins, selected elements, audit outputs) are merely hashable. Where they
compare (ints, strings, tuples of them), listing them sorted keeps the order data-independent and
seeded runs reproducible; a mix of types that do not compare has no natural order and each caller
chooses its fallback.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

__all__ = ["natural_order"]

H = TypeVar("H", bound=Hashable)


def natural_order(values: Iterable[H]) -> list[H] | None:
    """``values`` sorted, or None when they do not compare with each other.

    >>> natural_order([3, 1, 2]), natural_order([1, "a"])
    ([1, 2, 3], None)
    """
    items = list(values)
    try:
        # A hashable value need not be ordered: the comparison's TypeError is the check.
        return sorted(items)  # type: ignore[type-var]
    except TypeError:
        return None
