"""A killed launcher loses nothing and starts nothing twice; a claimed-but-unstarted or lost run recovers."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from models.run_log import RunLog
from runs.process import find_run_process, process_alive, run_files, spawn
from runs.publish import publish_run
from runs.state import LOST, claim
from tests.runs.conftest import read_traces, step_until
from tests.waiting import wait_for


def _count(status: str, *, started: bool | None = None) -> int:
    query = RunLog.select().where(RunLog.status == status)
    if started is True:
        query = query.where(RunLog.pid.is_null(False))
    return query.count()


@pytest.fixture
def launcher_process(start_launcher):
    """``launcher_process(cap)``: a `kickoff launcher` subprocess with short intervals."""
    env = {
        "LAUNCHER_POLL_SECONDS": "0.02",
        "LAUNCHER_DRAIN_INTERVAL_SECONDS": "0.5",
        "LAUNCHER_CLAIM_GRACE_SECONDS": "1",
        "LAUNCHER_SHUTDOWN_GRACE_SECONDS": "5",
    }
    return lambda cap: start_launcher(cap=cap, env=env)


def test_a_sigkilled_launcher_restarts_without_losing_or_doubling_runs(
    db, catalog, publisher, trace_dir, launcher_process
):
    params = {"seconds": 1.5}
    runs = [
        publish_run("sleep", params, trigger="cli", catalog=catalog, publisher=publisher) for _ in range(6)
    ]
    first = launcher_process(cap=2)
    wait_for(lambda: _count("running", started=True) == 2, timeout=20, what="two runs to start")
    assert _count("queued") == 4
    running = [r for r in RunLog.select().where(RunLog.status == "running")]

    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert all(process_alive(r.pid, str(r.id)) for r in running), "job processes must outlive the launcher"

    second = launcher_process(cap=2)
    wait_for(lambda: _count("succeeded") == 6, timeout=40, what="all six runs to succeed")
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=15) == 0

    rows = {str(r.id): r for r in RunLog.select()}
    assert set(rows) == {r.run_id for r in runs}  # nothing lost
    assert {(r.status, r.exit_code, r.attempt) for r in rows.values()} == {("succeeded", 0, 1)}
    traces = read_traces(trace_dir)
    assert sorted(t["run_id"] for t in traces) == sorted(rows)  # each started exactly once
    adopted = rows[str(running[0].id)]
    assert adopted.duration_seconds is not None and adopted.duration_seconds >= 1.0


def test_a_run_claimed_but_never_started_is_queued_again_after_the_grace(make_launcher, catalog):
    result = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    dead = make_launcher()
    claimed = claim(result.run_id, 1, catalog=catalog, host=dead.host)  # crash before spawn
    assert claimed.run is not None and RunLog.get_by_id(result.run_id).status == "running"

    launcher = make_launcher(claim_grace_seconds=0.2)
    time.sleep(0.3)
    launcher.recover()
    assert list(launcher.pending) == [result.run_id]
    step_until(launcher, lambda: RunLog.get_by_id(result.run_id).status == "succeeded")
    assert RunLog.get_by_id(result.run_id).attempt == 1


def test_a_run_claimed_just_before_a_quick_restart_is_queued_again_by_a_later_rescan(make_launcher, catalog):
    result = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    dead = make_launcher()
    claim(result.run_id, 1, catalog=catalog, host=dead.host)  # crash between claim and mark_started

    launcher = make_launcher(claim_grace_seconds=0.5, rescan_interval_seconds=0.1)
    launcher.recover()  # restarted within the grace: the row may still be starting, so left alone
    assert result.run_id not in launcher.pending and result.run_id not in launcher.running
    assert RunLog.get_by_id(result.run_id).status == "running"
    step_until(launcher, lambda: RunLog.get_by_id(result.run_id).status == "succeeded", timeout=10)
    assert RunLog.get_by_id(result.run_id).attempt == 1


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        pytest.param("fail", ("failed", 1, LOST), id="no-budget-fails-lost"),
        pytest.param("flaky", ("queued", 2, None), id="budget-left-retries"),
    ],
)
def test_an_orphan_that_vanished_without_an_exit_code_is_lost(make_launcher, catalog, job, expected):
    result = publish_run(job, trigger="cli", catalog=catalog, publisher=None)
    launcher = make_launcher()
    run = claim(result.run_id, 1, catalog=catalog, host=launcher.host).run
    gone = subprocess.Popen(["true"])
    gone.wait()
    RunLog.update(pid=gone.pid).where(RunLog.id == run.id).execute()
    run_files(launcher.data_dir, run).exit.unlink(missing_ok=True)

    launcher.recover()
    assert result.run_id in launcher.running and launcher.stats.adopted == 1
    launcher.reap()
    row = RunLog.get_by_id(result.run_id)
    assert (row.status, row.attempt, row.reason) == expected
    assert row.error == "attempt 1: lost"


def test_an_orphan_that_finished_is_recorded_from_its_exit_file(make_launcher, catalog):
    result = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    launcher = make_launcher()
    run = claim(result.run_id, 1, catalog=catalog, host=launcher.host).run
    files = run_files(launcher.data_dir, run)
    files.exit.parent.mkdir(parents=True, exist_ok=True)
    files.exit.write_text("7\n")
    RunLog.update(pid=2**22 + 17, started_at=run.claimed_at).where(RunLog.id == run.id).execute()
    assert not process_alive(2**22 + 17, result.run_id)
    launcher.recover()
    launcher.reap()
    row = RunLog.get_by_id(result.run_id)
    assert (row.status, row.exit_code) == ("failed", 7)
    assert os.path.exists(files.exit)


def test_a_run_started_whose_pid_never_reached_run_log_is_found_and_not_started_twice(
    make_launcher, catalog, trace_dir
):
    params = {"seconds": 1}
    result = publish_run("sleep", params, trigger="cli", catalog=catalog, publisher=None)
    dead = make_launcher()
    claimed = claim(result.run_id, 1, catalog=catalog, host=dead.host)
    proc = spawn(claimed.run, claimed.job, files=run_files(dead.data_dir, claimed.run), base_env=dead.job_env)
    try:  # the launcher died before mark_started: run_log has no pid
        assert RunLog.get_by_id(result.run_id).pid is None
        assert find_run_process(result.run_id, 1) == proc.pid

        launcher = make_launcher(claim_grace_seconds=0.0)
        launcher.recover()
        assert launcher.running[result.run_id].pid == proc.pid and not launcher.pending
        step_until(launcher, lambda: RunLog.get_by_id(result.run_id).status == "succeeded")
    finally:
        proc.wait(timeout=10)
    assert [t["run_id"] for t in read_traces(trace_dir)] == [result.run_id]
