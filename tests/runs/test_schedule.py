"""Scheduled catalog jobs: one run per cron slot (job@slot), so a doubled tick is harmless."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.run_log import RunLog
from publisher.amqp import read_messages
from publisher.queues import JOB_RUNS
from runs.catalog import parse_catalog
from runs.schedule import latest_slot, publish_scheduled_runs

T = datetime(2024, 5, 21, 18, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "slot"),
    [
        pytest.param(T, T, id="exactly-on-the-slot"),
        pytest.param(T.replace(minute=59, second=59), T, id="end-of-the-hour"),
        pytest.param(
            T.replace(hour=17, minute=59, second=59, microsecond=900000), T.replace(hour=17), id="just-before"
        ),
    ],
)
def test_the_latest_slot_is_the_last_cron_time_at_or_before_now(catalog, now, slot):
    assert latest_slot(catalog.job("heartbeat"), now) == slot


def test_a_doubled_tick_publishes_one_run_per_slot(db, catalog, publisher, amqp_vhost, frozen_clock):
    frozen_clock.now = T.replace(minute=0, second=3)
    first = publish_scheduled_runs(catalog=catalog, publisher=publisher)
    second = publish_scheduled_runs(catalog=catalog, publisher=publisher)
    assert first.queued == ["heartbeat@2024-05-21T18:00:00Z"] and second.queued == []
    assert second.duplicate == ["heartbeat@2024-05-21T18:00:00Z"]
    frozen_clock.advance(hours=1)
    third = publish_scheduled_runs(catalog=catalog, publisher=publisher)
    assert third.queued == ["heartbeat@2024-05-21T19:00:00Z"]
    runs = list(RunLog.select().order_by(RunLog.queued_at))
    assert [(r.job, r.trigger) for r in runs] == [("heartbeat", "schedule")] * 2
    assert len(read_messages(url=amqp_vhost, queue=JOB_RUNS)) == 2


def test_a_slot_older_than_the_jobs_expiry_is_not_published(db):
    catalog = parse_catalog(
        {"jobs": {"nightly": {"command": ["true"], "schedule": "0 3 * * *", "expires_after_seconds": 3600}}}
    )
    report = publish_scheduled_runs(catalog=catalog, publisher=None, now=T)  # 15 h after 03:00
    assert report.queued == [] and report.late == ["nightly@2024-05-21T03:00:00+00:00"]
    assert RunLog.select().count() == 0
