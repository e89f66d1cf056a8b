"""The nemesis's schedule (harness/chaos/schedule.py): a pure function of the seed and the run's shape."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from harness.chaos.schedule import FAULT_KINDS, PARTITION_SERVICES, WORKER_KINDS, counts, load, plan


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


def test_a_schedule_written_as_a_runs_json_reads_back_as_the_same_faults(tmp_path):
    faults = plan(62, minutes=2, hosts=3)
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps([f.as_dict() for f in faults]))
    assert load(path, hosts=3, workers_per_host=2) == faults


def test_the_schedule_files_in_bench_load():
    for path in sorted((Path(__file__).resolve().parents[2] / "bench" / "schedules").glob("*.json")):
        assert load(path, hosts=3, workers_per_host=2), path


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ({"at": 1, "kind": "flood", "host": 0}, "unknown fault kind 'flood'"),
        ({"at": 1, "kind": "kill", "host": 3, "worker": 0}, "host 3 is not one of the run's 3 hosts"),
        ({"at": 1, "kind": "kill", "host": 0}, "kill: a worker"),
        ({"at": 1, "kind": "deploy", "host": 0, "worker": 1}, "deploy: no worker"),
        (
            {"at": 1, "kind": "pause", "host": 0, "worker": 2, "seconds": 9},
            "worker 2 is not one of a host's 2",
        ),
        ({"at": 1, "kind": "redis-restart", "host": 0, "seconds": 2}, "redis-restart: no host"),
        ({"at": 1, "kind": "partition-feed", "host": 0, "seconds": 5}, "mode None"),
        ({"at": 1, "kind": "partition-feed", "host": 0, "seconds": 5, "mode": "drop"}, "mode 'drop'"),
        ({"at": -1, "kind": "deploy", "host": 0}, "not negative"),
        ({"kind": "deploy", "host": 0}, "'at' and 'seconds' are seconds"),
        ({"at": 1, "kind": "deploy", "host": 0, "when": 3}, "keys among"),
    ],
)
def test_a_bad_fault_in_a_schedule_file_is_named(tmp_path, fault, says):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([fault]))
    with pytest.raises(ValueError, match=re.escape(says)) as raised:
        load(path, hosts=3, workers_per_host=2)
    assert str(path) in str(raised.value)
