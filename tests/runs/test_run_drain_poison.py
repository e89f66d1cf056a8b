"""One bad run outbox row never stops the run drain: it is set aside (dead, with its reason),
counted and logged, and the rows after it are published (real RabbitMQ and PostgreSQL)."""

from __future__ import annotations

import json

from config.set_aside import set_aside_count
from models.run_log import JobRunOutbox, RunLog
from publisher.amqp import read_messages
from publisher.queues import JOB_RUNS
from runs.publish import dead_outbox_count, drain_job_runs, pending_outbox_count, publish_run
from tests.runs.conftest import step_until
from tests.runs.test_cli_runs import kickoff


def _poisoned_row(catalog, payload: dict) -> tuple[str, int]:
    """A queued run whose (only) outbox row carries ``payload``: (run id, row id), oldest row first."""
    run = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    row = JobRunOutbox.get(JobRunOutbox.run == run.run_id)
    row.payload = payload
    row.save()
    return run.run_id, row.id


def test_a_row_that_is_not_a_run_command_is_set_aside_and_the_rows_after_it_are_published(
    db, catalog, publisher, amqp_vhost, caplog
):
    bad_run, bad_row = _poisoned_row(catalog, {"hello": 1})
    good = [publish_run("noop", trigger="cli", catalog=catalog, publisher=None).run_id for _ in range(2)]
    before = set_aside_count("run drain")

    with caplog.at_level("WARNING", logger="config.set_aside"):
        report = drain_job_runs(publisher=publisher)

    assert (report.published, report.dead, report.failed) == (2, 1, 0)
    assert [body["run_id"] for body, _ in read_messages(url=amqp_vhost, queue=JOB_RUNS)] == good
    row = JobRunOutbox.get_by_id(bad_row)
    assert row.dead_at is not None and row.published_at is None
    assert row.last_error.startswith("dead: not a RunCommand: attempt must be an integer from 1")
    assert set_aside_count("run drain") - before == 1
    [line] = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert bad_run in line and "attempt must be" in line
    assert (pending_outbox_count(), dead_outbox_count()) == (0, 1)
    assert RunLog.get_by_id(bad_run).status == "queued"  # the run itself waits for a rescan
    assert drain_job_runs(publisher=publisher) == type(report)()  # a dead row is never taken again


def test_a_row_whose_payload_names_another_run_is_set_aside(db, catalog, publisher, amqp_vhost):
    other = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    payload = JobRunOutbox.get(JobRunOutbox.run == other.run_id).payload
    _, bad_row = _poisoned_row(catalog, payload)
    JobRunOutbox.delete().where(JobRunOutbox.run == other.run_id).execute()

    assert drain_job_runs(publisher=publisher).dead == 1
    assert f"the payload is run {other.run_id} attempt 1" in JobRunOutbox.get_by_id(bad_row).last_error
    assert read_messages(url=amqp_vhost, queue=JOB_RUNS) == []


def test_the_launcher_starts_a_queued_run_whose_outbox_row_is_behind_a_poisoned_one(
    make_launcher, catalog, publisher
):
    launcher = make_launcher()
    launcher.step()  # its first rescan is done; the next is 30 s away, so runs start from commands
    _, bad_row = _poisoned_row(catalog, {"run_id": None})
    run = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)  # left to the drain

    step_until(launcher, lambda: RunLog.get_by_id(run.run_id).status == "succeeded")

    assert JobRunOutbox.get_by_id(bad_row).dead_at is not None
    assert launcher.stats.accepted == 1


def test_kickoff_runs_drain_reports_the_rows_it_set_aside(db, catalog, publisher, subprocess_env):
    _poisoned_row(catalog, {"hello": 1})
    publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    out = kickoff(subprocess_env, "runs", "drain", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"published": 1, "stale": 0, "failed": 0, "dead": 1}


def test_kickoff_runs_dead_lists_the_set_aside_rows_with_their_reason(db, catalog, publisher, subprocess_env):
    assert "no dead run outbox rows" in kickoff(subprocess_env, "runs", "dead").stdout
    bad_run, bad_row = _poisoned_row(catalog, {"hello": 1})
    publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    assert drain_job_runs(publisher=publisher).dead == 1

    out = kickoff(subprocess_env, "runs", "dead", "--json")
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)["rows"]
    assert (row["id"], row["run_id"], row["attempt"], row["payload"]) == (bad_row, bad_run, 1, {"hello": 1})
    assert row["reason"].startswith("dead: not a RunCommand: attempt must be an integer from 1")
    text = kickoff(subprocess_env, "runs", "dead").stdout
    assert bad_run in text and "attempt must be an integer" in text
