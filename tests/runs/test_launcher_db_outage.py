"""PostgreSQL goes away under a running `kickoff launcher` (a fault proxy in front of it).

The launcher's DATABASE_URL points at harness/faultproxy.py; the test itself talks to PostgreSQL
directly. While runs are running and job_runs deliveries keep arriving, the proxy cuts every
connection and refuses new ones, then lets PostgreSQL back. Every run must end exactly once
with its real outcome (exit code, succeeded or failed), and no delivery may be lost.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

from harness.faultproxy import FaultProxy
from models.run_log import RunLog, RunStatus
from runs.publish import publish_run
from tests.runs.conftest import queue_counts, read_traces
from tests.waiting import wait_for

#: Away for six of the launcher's 2 s retries, rescans and connect timeouts; the 6 s jobs end meanwhile.
AWAY_SECONDS = 12.0
TERMINAL = (RunStatus.SUCCEEDED.value, RunStatus.FAILED.value, RunStatus.SKIPPED.value)


@pytest.fixture
def pg_proxy() -> Iterator[FaultProxy]:
    with FaultProxy(("127.0.0.1", 5432)) as proxy:
        yield proxy


@pytest.fixture
def launcher_via(start_launcher) -> Callable[[str], subprocess.Popen]:
    """Start `kickoff launcher --cap 4` with DATABASE_URL set to the given URL; killed at teardown."""

    def start(database_url: str) -> subprocess.Popen:
        env = {
            "DATABASE_URL": database_url,
            "DATABASE_CONNECT_TIMEOUT_SECONDS": "2",
            "LAUNCHER_POLL_SECONDS": "0.02",
            "LAUNCHER_DRAIN_INTERVAL_SECONDS": "0.5",
            "LAUNCHER_RESCAN_INTERVAL_SECONDS": "2",
            "LAUNCHER_CLAIM_GRACE_SECONDS": "2",
            "LAUNCHER_SHUTDOWN_GRACE_SECONDS": "5",
        }
        return start_launcher(cap=4, env=env)

    return start


@pytest.mark.outage
@pytest.mark.timeout(600)
def test_postgresql_going_away_under_the_launcher_loses_and_doubles_no_run(
    db, catalog, publisher, trace_dir, subprocess_env, amqp_vhost, pg_proxy, launcher_via, tmp_path
):
    expected: dict[str, tuple[str, int]] = {}  # run id -> (status, exit code)

    def publish(job: str, outcome: tuple[str, int], **params: object) -> None:
        result = publish_run(job, params, trigger="cli", catalog=catalog, publisher=publisher)
        assert result.status == "queued"
        expected[result.run_id] = outcome

    launcher = launcher_via(pg_proxy.url_via(subprocess_env["DATABASE_URL"]))
    for _ in range(4):
        publish("sleep", ("succeeded", 0), seconds=6)
    for _ in range(2):
        publish("fail", ("failed", 3), exit_code=3)
    wait_for(
        lambda: RunLog.select().where(RunLog.status == "running", RunLog.pid.is_null(False)).count() >= 3,
        timeout=60,
        what="runs running under the launcher",
    )

    # PostgreSQL goes away: the launcher's connections are cut, new ones refused.
    assert pg_proxy.refuse() >= 1, "the launcher had no connection to cut"
    away = time.monotonic()
    for _ in range(3):  # deliveries the launcher cannot check while PostgreSQL is away
        publish("noop", ("succeeded", 0), seconds=1)
    publish("fail", ("failed", 5), exit_code=5)
    publish("sleep", ("succeeded", 0), seconds=2)
    # the runs that were running finish while PostgreSQL is away
    wait_for(
        lambda: time.monotonic() - away >= AWAY_SECONDS and len(read_traces(trace_dir)) >= 3,
        timeout=120,
        what="running jobs finished during the outage",
    )
    assert launcher.poll() is None, (tmp_path / "launcher-0.log").read_text()[-3000:]
    finished_while_away = len(read_traces(trace_dir))
    pg_proxy.forward()

    wait_for(
        lambda: RunLog.select().where(RunLog.status.in_(TERMINAL)).count() == len(expected),
        timeout=240,
        what="every run ended after PostgreSQL came back",
    )
    assert launcher.poll() is None, (tmp_path / "launcher-0.log").read_text()[-3000:]
    runs = {str(r.id): r for r in RunLog.select()}
    assert {run_id: (runs[run_id].status, runs[run_id].exit_code) for run_id in expected} == expected
    assert {r.attempt for r in runs.values()} == {1}  # none started twice
    traces = read_traces(trace_dir)
    assert sorted(t["run_id"] for t in traces) == sorted(expected)  # each ran exactly once
    assert queue_counts(amqp_vhost) == (0, 0)  # every delivery settled, none left behind

    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=60) == 0
    log = (tmp_path / "launcher-0.log").read_text()
    print(
        f"finished while PostgreSQL was away: {finished_while_away}; launcher log lines: {log.count(chr(10))}"
    )
