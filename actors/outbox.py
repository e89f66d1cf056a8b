"""Periodic publisher actors: drain due outbox rows (releasing or cancelling held claims), verify results."""

from __future__ import annotations

import dramatiq

from actors.actor_runtime import current
from actors.broker import QUEUE_DEFAULT
from publisher.drain import REPORT_FIELDS, drain_outbox_concurrently
from publisher.results import verify_results


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def drain_outbox(max_seconds: float | None = None) -> dict:
    """Drain the activity outbox for at most OUTBOX_DRAIN_MAX_SECONDS with OUTBOX_DRAIN_WORKERS drains."""
    report = drain_outbox_concurrently(settings=current().settings, max_seconds=max_seconds)
    return report.as_json(REPORT_FIELDS)


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def verify_action_results() -> dict:
    """Settle the results consumers reported (verified or failed); fail long-unreported actions."""
    timeout = current().settings.action_result_timeout_seconds
    return verify_results(result_timeout_seconds=timeout).as_json()
