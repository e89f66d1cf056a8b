"""Capped exponential backoff: the one rule every retry loop of kickoff waits by."""

from __future__ import annotations

# 2**40 times any base exceeds every cap kickoff configures; the bound keeps float math finite.
_MAX_DOUBLINGS = 40


def backoff_seconds(failure: int, *, base: float, cap: float) -> float:
    """The wait after the ``failure``-th failure in a row (1 for the first): ``base`` doubling
    per further failure, never more than ``cap``."""
    return min(base * 2 ** min(max(failure - 1, 0), _MAX_DOUBLINGS), cap)
