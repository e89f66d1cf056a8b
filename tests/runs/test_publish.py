"""publish_run and drain_job_runs against PostgreSQL and RabbitMQ: dedupe keys, outbox, drain."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from models.run_log import JobRunOutbox, RunLog, RunStatus, Trigger
from publisher.amqp import AmqpPublisher, read_messages
from publisher.queues import JOB_RUNS
from runs.errors import InvalidRunParams, InvalidTrigger, UnknownJob
from runs.publish import drain_job_runs, publish_run
from tests.racing import race

SLOT = datetime(2024, 5, 21, 18, 0, tzinfo=UTC)


def test_publish_run_writes_the_queued_row_and_outbox_row_and_publishes_the_command(
    db, catalog, publisher, amqp_vhost
):
    result = publish_run("noop", {"seconds": 0}, trigger=Trigger.CLI, catalog=catalog, publisher=publisher)
    assert result.status == "queued" and result.published
    run = RunLog.get_by_id(result.run_id)
    assert run.status == RunStatus.QUEUED and run.attempt == 1 and run.params == {"seconds": 0}
    assert run.expires_at is not None and run.expires_at > run.queued_at
    outbox = JobRunOutbox.get(JobRunOutbox.run == run.id)
    assert outbox.published_at is not None and outbox.attempt == 1
    [(body, props)] = read_messages(url=amqp_vhost, queue=JOB_RUNS)
    assert body == {
        "run_id": result.run_id,
        "job": "noop",
        "attempt": 1,
        "trigger": "cli",
        "dedupe_key": result.run_id,
        "parent_id": None,
    }
    assert props.message_id == f"{result.run_id}:1"
    assert props.delivery_mode == 2


@pytest.mark.parametrize("trigger", [Trigger.MANUAL, Trigger.CLI, Trigger.MCP], ids=lambda t: t.value)
def test_manual_cli_and_mcp_runs_get_a_fresh_key_equal_to_their_run_id(db, catalog, trigger):
    first = publish_run("noop", trigger=trigger, catalog=catalog, publisher=None)
    second = publish_run("noop", trigger=trigger, catalog=catalog, publisher=None)
    assert first.status == second.status == "pending"  # saved, left to the drain (no publisher)
    assert first.run_id != second.run_id
    assert first.dedupe_key == first.run_id and second.dedupe_key == second.run_id


def test_schedule_runs_dedupe_on_job_at_slot(db, catalog):
    first = publish_run("heartbeat", trigger="schedule", slot=SLOT, catalog=catalog, publisher=None)
    again = publish_run("heartbeat", trigger="schedule", slot=SLOT, catalog=catalog, publisher=None)
    later = publish_run(
        "heartbeat", trigger="schedule", slot=SLOT.replace(hour=19), catalog=catalog, publisher=None
    )
    assert first.dedupe_key == "heartbeat@2024-05-21T18:00:00Z"
    assert (first.status, again.status, later.status) == ("pending", "duplicate", "pending")
    assert again.run_id == first.run_id
    assert RunLog.select().count() == 2 and JobRunOutbox.select().count() == 2


def test_chain_runs_dedupe_on_job_at_chain_root(db, catalog):
    root = publish_run("chain_extract", trigger="cli", catalog=catalog, publisher=None).run_id
    first = publish_run("chain_transform", trigger="chain", chain_root=root, catalog=catalog, publisher=None)
    again = publish_run("chain_transform", trigger="chain", chain_root=root, catalog=catalog, publisher=None)
    other = publish_run(
        "chain_transform", trigger="chain", chain_root=uuid.uuid4(), catalog=catalog, publisher=None
    )
    assert first.dedupe_key == f"chain_transform@{root}"
    assert (first.status, again.status, other.status) == ("pending", "duplicate", "pending")
    assert again.run_id == first.run_id


def test_event_runs_dedupe_on_job_key_and_debounce_window(db, catalog, frozen_clock):
    frozen_clock.now = datetime(2024, 5, 21, 18, 0, 5, tzinfo=UTC)
    first = publish_run("event_refresh", trigger="event", event_key="m1", catalog=catalog, publisher=None)
    frozen_clock.advance(seconds=20)  # same 30 s window
    same_window = publish_run(
        "event_refresh", trigger="event", event_key="m1", catalog=catalog, publisher=None
    )
    other_key = publish_run("event_refresh", trigger="event", event_key="m2", catalog=catalog, publisher=None)
    frozen_clock.advance(seconds=10)  # 18:00:35, the next window
    next_window = publish_run(
        "event_refresh", trigger="event", event_key="m1", catalog=catalog, publisher=None
    )
    assert first.dedupe_key == "event_refresh@m1@2024-05-21T18:00:00Z"
    assert next_window.dedupe_key == "event_refresh@m1@2024-05-21T18:00:30Z"
    assert [r.status for r in (first, same_window, other_key, next_window)] == [
        "pending",
        "duplicate",
        "pending",
        "pending",
    ]


def test_racing_publishers_of_one_key_make_one_run(db, catalog, settings):

    def publish(go):
        go()
        return publish_run("heartbeat", trigger="schedule", slot=SLOT, catalog=catalog, publisher=None)

    results, errors = race(publish, callers=8, timeout=30)
    assert errors == []
    assert sorted(r.status for r in results) == ["duplicate"] * 7 + ["pending"]
    assert len({r.run_id for r in results}) == 1
    assert RunLog.select().count() == 1 and JobRunOutbox.select().count() == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        pytest.param({"job_name": "nope", "trigger": "cli"}, UnknownJob, id="unknown-job"),
        pytest.param({"job_name": "sleep", "trigger": "cli"}, InvalidRunParams, id="params-fail-schema"),
        pytest.param(
            {"job_name": "heartbeat", "trigger": "schedule"}, InvalidTrigger, id="schedule-without-slot"
        ),
        pytest.param({"job_name": "noop", "trigger": "chain"}, InvalidTrigger, id="chain-without-root"),
        pytest.param({"job_name": "noop", "trigger": "event"}, InvalidTrigger, id="event-without-key"),
        pytest.param({"job_name": "noop", "trigger": "scope"}, InvalidTrigger, id="scope-is-not-published"),
    ],
)
def test_an_invalid_request_saves_nothing(db, catalog, kwargs, error):
    with pytest.raises(error):
        publish_run(catalog=catalog, publisher=None, **kwargs)
    assert RunLog.select().count() == 0 and JobRunOutbox.select().count() == 0


def test_a_failed_publish_keeps_the_run_queued_and_the_drain_sends_it_later(db, catalog, amqp_vhost):
    with AmqpPublisher(url=amqp_vhost) as admin:
        admin.delete_queue(JOB_RUNS)  # passive declare fails: the queue is missing
    with AmqpPublisher(url=amqp_vhost) as pub:
        result = publish_run("noop", trigger="cli", catalog=catalog, publisher=pub)
        assert result.status == "pending" and not result.published
        row = JobRunOutbox.get(JobRunOutbox.run == result.run_id)
        assert row.published_at is None and row.tries == 1 and "does not exist" in row.last_error
        assert RunLog.get_by_id(result.run_id).status == RunStatus.QUEUED

        pub.declare_durable([JOB_RUNS])
        report = drain_job_runs(publisher=pub)
    try:
        assert (report.published, report.failed) == (1, 0)
        assert JobRunOutbox.get_by_id(row.id).published_at is not None
        assert [b["run_id"] for b, _ in read_messages(url=amqp_vhost, queue=JOB_RUNS)] == [result.run_id]
        assert drain_job_runs(publisher=AmqpPublisher(url=amqp_vhost)).published == 0
    finally:
        with AmqpPublisher(url=amqp_vhost) as admin:
            admin.delete_queue(JOB_RUNS)


def test_a_broker_outage_leaves_the_run_for_the_drain(db, catalog):
    down = AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=0.5)
    result = publish_run("noop", trigger="cli", catalog=catalog, publisher=down)
    assert result.status == "pending" and not result.published
    assert drain_job_runs(publisher=down).failed == 1
    assert JobRunOutbox.get(JobRunOutbox.run == result.run_id).tries == 2


def test_the_drain_marks_commands_of_runs_that_moved_on_without_sending_them(
    db, catalog, publisher, amqp_vhost
):
    result = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    RunLog.update(status=RunStatus.SKIPPED.value).where(RunLog.id == result.run_id).execute()
    report = drain_job_runs(publisher=publisher)
    assert (report.published, report.stale) == (0, 1)
    assert read_messages(url=amqp_vhost, queue=JOB_RUNS) == []
