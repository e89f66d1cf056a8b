"""A worker process's heap freezer (actors.collector): frozen every period, thawed and collected in
one full pass every thaw period, so no cycle among frozen objects outlives a thaw period."""

from __future__ import annotations

import gc

import pytest

from actors.collector import HeapFreezer

pytestmark = pytest.mark.unit


class RecordingCollector:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def collect(self) -> int:
        self.calls.append("collect")
        return 0


def test_each_period_freezes_and_every_thaw_period_thaws_collects_and_freezes_again() -> None:
    now = [0.0]
    collector = RecordingCollector()
    freezer = HeapFreezer(thaw_seconds=900.0, collector=collector, clock=lambda: now[0])
    for at in (60.0, 120.0, 899.0):
        now[0] = at
        freezer.step()
    assert collector.calls == ["freeze"] * 3
    now[0] = 900.0
    freezer.step()
    assert collector.calls[3:] == ["unfreeze", "collect", "freeze"]
    assert freezer.full_passes == 1
    now[0] = 960.0
    freezer.step()  # the thaw period counts from the last thaw
    assert collector.calls[6:] == ["freeze"]
    now[0] = 1800.0
    freezer.step()
    assert collector.calls[7:] == ["unfreeze", "collect", "freeze"]


def test_a_cycle_among_frozen_objects_is_freed_by_the_next_thaw() -> None:
    """What the thaw is for: a frozen cycle is out of every pass until it."""
    import weakref

    class Node:
        pass

    now = [0.0]
    freezer = HeapFreezer(thaw_seconds=900.0, clock=lambda: now[0])
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    try:
        freezer.step()  # frozen while alive
        del a, b
        gc.collect()
        assert gone() is not None  # frozen: no pass frees it
        now[0] = 900.0
        freezer.step()
        assert gone() is None
    finally:
        gc.unfreeze()  # nothing of this test process stays frozen
