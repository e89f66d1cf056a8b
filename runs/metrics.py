"""Prometheus counters of the job-run loops (set-aside commands and run outbox rows), in-process.

They live in prometheus_client's default registry of the process that did the work; the
launcher serves that registry on LAUNCHER_METRICS_PORT (``serve_metrics``). The deployment-wide
count of dead run outbox rows is read from PostgreSQL by the API (kickoff_run_outbox_dead).

Each counter is created on first use, not at import: a Dramatiq worker (the tick_job_runs drain)
must import prometheus_client only after its Prometheus middleware switched it to multiprocess
mode, so that the middleware's exposition server serves these counters with Dramatiq's own.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

logger = logging.getLogger(__name__)

#: The counters' names as Prometheus exposes them (with ``_total``).
REJECTED_COMMANDS = "kickoff_launcher_rejected_commands_total"
RUN_OUTBOX_SET_ASIDE = "kickoff_run_outbox_set_aside_total"

_HELP = {
    REJECTED_COMMANDS: (
        "job_runs deliveries the launcher could not handle and set aside on job_runs.XQ, by kind"
        " (not_json, invalid, unknown_job, error).",
        ["kind"],
    ),
    RUN_OUTBOX_SET_ASIDE: (
        "Run outbox rows this process marked dead: their payload is not their run's RunCommand or"
        " cannot be encoded (the API's kickoff_run_outbox_dead counts them all).",
        [],
    ),
}
_counters: dict[str, Any] = {}
_mu = threading.Lock()


def counter(name: str) -> Any:
    """The process's Prometheus counter ``name`` (one of this module's names), made on first use."""
    with _mu:
        if name not in _counters:
            from prometheus_client import Counter

            text, labels = _HELP[name]
            _counters[name] = Counter(name.removesuffix("_total"), text, labels)
        return _counters[name]


def serve_metrics(port: int) -> None:
    """Serve this process's default registry on ``port`` (all interfaces); 0 serves nothing."""
    if port:
        from prometheus_client import start_http_server

        for name in _HELP:  # exposed at 0 from the start
            counter(name)
        start_http_server(port)
        logger.info("serving Prometheus metrics on port %s", port)
