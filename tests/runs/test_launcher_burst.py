"""A burst of 200 runs: the job processes themselves never overlap more than the cap, and every
delivery is acked as soon as it is recorded (none held while its run waits)."""

from __future__ import annotations

from models.run_log import RunLog
from runs.publish import publish_run
from tests.runs.conftest import LauncherThread, queue_counts, read_traces
from tests.waiting import wait_for

BURST = 200
CAP = 8


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end before a start at the same time)."""
    events = sorted(
        [(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1])
    )
    best = current = 0
    for _, delta in events:
        current += delta
        best = max(best, current)
    return best


def test_max_overlap_counts_open_intervals():
    assert max_overlap([(0, 1), (0.5, 2), (1.5, 3)]) == 2
    assert max_overlap([(0, 1), (1, 2)]) == 1


def test_a_burst_of_200_runs_never_exceeds_the_cap_and_no_delivery_waits_for_its_run(
    make_launcher, catalog, publisher, trace_dir, amqp_vhost
):
    launcher = make_launcher(cap=CAP, prefetch=50)
    thread = LauncherThread(launcher).start()
    try:
        params = {"seconds": 0.1}
        runs = [
            publish_run("noop", params, trigger="cli", catalog=catalog, publisher=publisher)
            for _ in range(BURST)
        ]
        wait_for(
            lambda: launcher.stats.accepted + launcher.stats.stale >= BURST,
            timeout=30,
            interval=0.02,
            what=f"{BURST} deliveries taken",
        )
        assert launcher.stats.accepted == BURST
        waiting = RunLog.select().where(RunLog.status == "queued").count()
        counts = queue_counts(amqp_vhost)
        assert waiting > 0, "the burst finished before the check; make the jobs longer"
        assert counts == (0, 0), f"{waiting} runs wait for a slot, the broker still holds {counts}"

        wait_for(
            lambda: RunLog.select().where(RunLog.status == "succeeded").count() >= BURST,
            timeout=90,
            interval=0.1,
            what=f"{BURST} runs succeeded",
        )
    finally:
        thread.stop()

    assert RunLog.select().where(RunLog.status == "succeeded").count() == BURST
    traces = read_traces(trace_dir)
    assert sorted(t["run_id"] for t in traces) == sorted(r.run_id for r in runs)
    concurrency = max_overlap([(t["start"], t["end"]) for t in traces])
    assert 2 <= concurrency <= CAP
    assert launcher.stats.max_running <= CAP
    assert max(launcher.stats.ack_seconds) < 2.0  # one run_log read; generous for a loaded CI box
