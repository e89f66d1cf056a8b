"""The job-run tick: publish due scheduled catalog jobs and drain the run outbox (periodic)."""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path

import dramatiq

from actors.actor_runtime import current
from actors.broker import QUEUE_DEFAULT
from publisher.amqp import publisher_from_settings
from runs.catalog import Catalog, load_catalog
from runs.publish import RUN_OUTBOX, drain_job_runs
from runs.schedule import publish_scheduled_runs

logger = logging.getLogger(__name__)


@cache
def _catalog(path: Path) -> Catalog:
    return load_catalog(path)


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def tick_job_runs() -> dict:
    """Publish the latest slot of every scheduled job (job@slot dedupes a doubled tick), then
    publish run outbox rows whose first publish failed."""
    settings = current().settings
    with publisher_from_settings(settings) as publisher:
        schedule = publish_scheduled_runs(catalog=_catalog(settings.job_catalog_path), publisher=publisher)
        drained = drain_job_runs(publisher=publisher, batch=settings.job_run_drain_batch)
    result = {**schedule.to_dict(), **drained.as_json(RUN_OUTBOX.report_fields)}
    if schedule.queued or drained.published or drained.failed or drained.dead:
        logger.info("tick_job_runs: %s", result)
    return result
