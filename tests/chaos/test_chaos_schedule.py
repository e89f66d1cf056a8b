"""The nemesis's schedule (harness/chaos/schedule.py): a pure function of the seed and the run's shape."""

from __future__ import annotations

import itertools

import pytest

from harness.chaos.schedule import FAULT_KINDS, PARTITION_SERVICES, WORKER_KINDS, counts, plan


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another():
    first = plan(26, minutes=10, hosts=3)
    assert first == plan(26, minutes=10, hosts=3)
    assert first != plan(27, minutes=10, hosts=3)


def test_a_ten_minute_schedule_holds_every_kind_and_overlapping_faults():
    faults = plan(1, minutes=10, hosts=3)
    assert all(counts(faults)[kind] for kind in FAULT_KINDS), counts(faults)
    assert [f.at for f in faults] == sorted(f.at for f in faults)
    overlapping = [a for a, b in itertools.pairwise(faults) if b.at < a.heals_at]
    assert overlapping


@pytest.mark.parametrize("seed", range(20))
def test_every_fault_is_aimed_at_a_real_target_and_heals_by_the_end(seed):
    minutes, hosts, workers = 3, 3, 2
    for fault in plan(seed, minutes=minutes, hosts=hosts, workers_per_host=workers):
        assert 0 < fault.at < minutes * 60 and fault.heals_at <= minutes * 60 + 0.1
        assert (fault.host is None) == (fault.kind == "redis-restart")
        assert fault.host is None or 0 <= fault.host < hosts
        assert (fault.worker is not None) == (fault.kind in WORKER_KINDS)
        assert fault.worker is None or 0 <= fault.worker < workers
        assert (fault.mode is not None) == (fault.kind in PARTITION_SERVICES)
        assert (fault.skew_seconds != 0) == (fault.kind == "clock-skew")


def test_a_pause_outlasts_the_lease_unless_the_run_ends_first():
    pauses = [f for s in range(10) for f in plan(s, minutes=10, hosts=3) if f.kind == "pause"]
    assert pauses
    assert all(f.seconds >= 1.5 * 8 or f.heals_at >= 10 * 60 - 0.1 for f in pauses)


def test_kinds_narrow_the_schedule_and_unknown_kinds_are_refused():
    assert {f.kind for f in plan(3, minutes=5, hosts=2, kinds=("kill",))} == {"kill"}
    with pytest.raises(ValueError, match="unknown fault kinds"):
        plan(3, minutes=5, hosts=2, kinds=("meteor",))


def test_a_fault_describes_itself_on_one_line_and_as_a_dict():
    fault = next(f for f in plan(5, minutes=10, hosts=3) if f.kind == "partition-feed")
    assert "partition-feed host" in fault.describe() and fault.mode in fault.describe()
    assert fault.as_dict()["kind"] == "partition-feed" and "skew_seconds" not in fault.as_dict()
