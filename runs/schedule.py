"""Scheduled job runs: publish the latest due cron slot of each catalog job (dedupe job@slot)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from croniter import croniter

from config.clock import ensure_utc, utcnow
from models.run_log import Trigger
from runs.catalog import Catalog, Job
from runs.errors import RunError
from runs.publish import CommandPublisher, PublishResult, publish_run

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScheduleReport:
    """What one scheduler tick did, per job: queued, duplicate (slot already published) or too late."""

    queued: list[str] = field(default_factory=list)  # dedupe keys of new runs
    duplicate: list[str] = field(default_factory=list)  # slots an earlier tick already published
    late: list[str] = field(default_factory=list)  # slots older than the job's expiry, not published

    def to_dict(self) -> dict[str, list[str]]:
        return {"queued": self.queued, "duplicate": self.duplicate, "late": self.late}


def latest_slot(job: Job, now: datetime) -> datetime:
    """The most recent cron slot of ``job`` at or before ``now`` (UTC)."""
    assert job.schedule is not None
    now = ensure_utc(now, what="now")
    base = now.replace(microsecond=0) + timedelta(seconds=1)
    return ensure_utc(croniter(job.schedule, base).get_prev(datetime), what="slot")


def publish_scheduled_runs(
    *, catalog: Catalog, publisher: CommandPublisher | None, now: datetime | None = None
) -> ScheduleReport:
    """Publish one run (trigger schedule) for the latest slot of every scheduled job.

    The dedupe key job@slot makes a doubled or repeated tick harmless. A slot older than the
    job's expiry (the scheduler was down) is not published: the next slot is.
    """
    now = now or utcnow()
    report = ScheduleReport()
    for job in catalog.scheduled():
        slot = latest_slot(job, now)
        if (now - slot).total_seconds() > job.expires_after_seconds:
            report.late.append(f"{job.name}@{slot.isoformat()}")
            continue
        try:
            result: PublishResult = publish_run(
                job.name, {}, trigger=Trigger.SCHEDULE, catalog=catalog, publisher=publisher, slot=slot
            )
        except RunError as exc:
            logger.error("scheduled run of %s at %s not published: %s", job.name, slot, exc)
            continue
        (report.duplicate if result.status == "duplicate" else report.queued).append(result.dedupe_key)
    return report
