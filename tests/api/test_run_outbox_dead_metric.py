"""/metrics counts the run outbox rows the drain set aside (kickoff_run_outbox_dead), from PostgreSQL."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from models.run_log import JobRunOutbox
from publisher.amqp import AmqpPublisher
from runs.catalog import load_catalog
from runs.publish import drain_job_runs, publish_run


def _dead(text: str) -> float:
    [value] = [
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "kickoff_run_outbox_dead"
    ]
    return value


def test_metrics_count_a_run_outbox_row_the_drain_set_aside(
    db, api_server, fresh_queues, settings, amqp_vhost
):
    catalog = load_catalog(settings.job_catalog_path)
    assert _dead(httpx.get(api_server.url + "/metrics", timeout=60).text) == 0
    run = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    JobRunOutbox.update(payload={"hello": 1}).where(JobRunOutbox.run == run.run_id).execute()
    publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    with AmqpPublisher(url=amqp_vhost) as publisher:
        report = drain_job_runs(publisher=publisher)
    assert (report.published, report.dead) == (1, 1)
    assert _dead(httpx.get(api_server.url + "/metrics", timeout=60).text) == 1
