"""Prometheus counters of the job-run loops, in-process.

They live in prometheus_client's default registry of the process that did the work; the
launcher serves that registry on LAUNCHER_METRICS_PORT (``serve_metrics``). The deployment-wide
count of dead run outbox rows is read from PostgreSQL by the API (kickoff_run_outbox_dead).
"""

from __future__ import annotations

import logging

from prometheus_client import Counter, start_http_server

logger = logging.getLogger(__name__)

REJECTED_COMMANDS = Counter(
    "kickoff_launcher_rejected_commands",
    "job_runs deliveries the launcher could not handle and set aside on job_runs.XQ, by kind"
    " (not_json, invalid, unknown_job, error).",
    ["kind"],
)

RUN_OUTBOX_SET_ASIDE = Counter(
    "kickoff_run_outbox_set_aside",
    "Run outbox rows this process marked dead: their payload is not their run's RunCommand or"
    " cannot be encoded (the API's kickoff_run_outbox_dead counts them all).",
)


def serve_metrics(port: int) -> None:
    """Serve this process's default registry on ``port`` (all interfaces); 0 serves nothing."""
    if port:
        start_http_server(port)
        logger.info("serving Prometheus metrics on port %s", port)
