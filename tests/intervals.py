"""The one table of intervals tests run the real code at: every interval is a setting.

Each row names where it is used; ``env(row)`` gives it as environment variables (for os.environ
and subprocesses), ``fields(row, ...)`` as settings fields (for ``model_copy(update=...)``, which
does not parse strings). Pick the row whose processes match the test: in-process runs may beat
every 0.2 s, real worker subprocesses need realistic intervals (tests fail 1 run in 20 otherwise).
"""

from __future__ import annotations

#: How late a step may run on the suite's loaded two-core box (several test workers, other runs
#: beside them): a wall-clock assert allows this much beyond the interval it checks, and one that
#: cannot (it tells a pushed wake-up from a timed one) asserts order instead.
SLACK_SECONDS = 3.0

INTERVALS: dict[str, dict[str, str]] = {
    # In-process lifecycle runs (tests/lifecycle, the console's board): beats, stops and lost locks
    # happen within a second or two.
    "in_process": {
        "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "0.2",
        "LISTENER_HEARTBEAT_STALE_SECONDS": "1.5",
        "LISTENER_STOP_POLL_SECONDS": "0.1",
        "LISTENER_LOCK_LOSS_GRACE_SECONDS": "0.3",
        "LISTENER_STOP_FLAG_TTL_SECONDS": "30",
    },
    # In-process listeners while Redis or PostgreSQL restart (tests/listener/test_service_restarts.py):
    # heartbeats, stops and lost locks seen within the restart.
    "service_restarts": {
        "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "0.5",
        "LISTENER_STOP_POLL_SECONDS": "0.2",
        "LISTENER_LOCK_LOSS_GRACE_SECONDS": "0.5",
    },
    # One ``kickoff listen`` subprocess (tests/listener/test_listen_cli.py).
    "listen_subprocess": {
        "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "1",
        "LISTENER_HEARTBEAT_STALE_SECONDS": "20",
        "LISTENER_LOCK_LOSS_GRACE_SECONDS": "2",
        "LISTENER_STOP_POLL_SECONDS": "0.2",
    },
    # Real worker subprocesses: the default lease and stale threshold, a heartbeat every 5 s so a
    # test sees rows being written (the e2e tests; tests/lifecycle/conftest.py ``REAL_WORKER_CTX``).
    "real_worker": {
        "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "5",
        "LISTENER_HEARTBEAT_STALE_SECONDS": "180",
        "LISTENER_LOCK_LOSS_GRACE_SECONDS": "2",
        "LISTENER_STOP_POLL_SECONDS": "1",
        "LISTENER_WORKER_LEASE_SECONDS": "8",
        "LISTENER_REAPER_POLL_SECONDS": "0.5",
        "LISTENER_HANDOFF_SECONDS": "5",
        "LISTENER_HANDOFF_POLL_SECONDS": "0.05",
    },
    # A worker subprocess (the lifecycle's short intervals otherwise) beside an open row that must
    # look alive however long the worker takes to boot (tests/lifecycle/test_actors.py).
    "booting_worker": {
        "LISTENER_HEARTBEAT_STALE_SECONDS": "600",
    },
    # The production heartbeat and stale threshold, for tests of what the board and the deploy judge by
    # them (tests/lifecycle/test_board.py, test_deploy.py): Late after 60 s, Stale after 180 s.
    "production": {
        "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "30",
        "LISTENER_HEARTBEAT_STALE_SECONDS": "180",
    },
    # The listener's stream against srsim (tests/listener/conftest.py): quick reconnects, every
    # event flushed to the archive at once.
    "stream": {
        "LISTENER_RECONNECT_BACKOFF_SECONDS": "0.05",
        "LISTENER_RECONNECT_BACKOFF_MAX_SECONDS": "0.1",
        "LISTENER_CONNECT_TIMEOUT_SECONDS": "2.0",
        "LISTENER_READ_TIMEOUT_SECONDS": "2.0",
        "LISTENER_ARCHIVE_FLUSH_SECONDS": "0.0",
    },
}


def env(row: str) -> dict[str, str]:
    """The row as environment variables (a copy)."""
    return dict(INTERVALS[row])


def fields(row: str, *only: str) -> dict[str, float]:
    """The row as settings fields (``listener_stop_poll_seconds``: 0.1); ``only`` keeps those fields."""
    values = {name.lower(): float(value) for name, value in INTERVALS[row].items()}
    return {name: values[name] for name in only} if only else values
