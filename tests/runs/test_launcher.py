"""The launcher in-process against RabbitMQ and PostgreSQL, starting real job processes."""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path

import peewee
import pytest

from config.clock import utcnow
from models.run_log import RunLog, RunStatus, SkipReason, Trigger
from publisher.amqp import AmqpPublisher, OutgoingMessage, read_messages
from publisher.queues import JOB_RUNS
from runs.command import RunCommand
from runs.publish import command_message, drain_job_runs, publish_run
from tests.runs.conftest import queue_counts, read_set_aside, read_traces, step_until


def _final(run_id: str) -> bool:
    return RunLog.get_by_id(run_id).status in ("succeeded", "failed", "skipped")


def test_a_published_run_is_started_with_its_environment_and_recorded(
    make_launcher, catalog, publisher, trace_dir: Path
):
    launcher = make_launcher()
    result = publish_run("noop", {}, trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: _final(result.run_id))

    run = RunLog.get_by_id(result.run_id)
    assert (run.status, run.exit_code, run.attempt) == ("succeeded", 0, 1)
    assert run.duration_seconds is not None and run.duration_seconds >= 0
    assert run.started_at is not None and run.ended_at >= run.started_at
    assert Path(run.log_path).is_file() and run.log_path.endswith(f"{run.id}.1.log")
    [trace] = read_traces(trace_dir)
    assert trace["run_id"] == result.run_id
    assert trace["trigger"] == "cli"
    assert trace["parent_id"] == ""
    assert trace["job_name"] == f"noop@{result.run_id}"
    assert trace["pid"] != run.pid  # run.pid is the exit-code wrapper; the job is its child


def test_the_job_log_holds_the_process_output(make_launcher, catalog, publisher):
    launcher = make_launcher()
    result = publish_run("fail", {"exit_code": 3}, trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: _final(result.run_id))
    run = RunLog.get_by_id(result.run_id)
    assert (run.status, run.exit_code, run.error) == ("failed", 3, "attempt 1: exit code 3")
    assert "attempt 1: exiting 3" in Path(run.log_path).read_text()


def test_a_delivery_is_acked_while_its_run_still_waits_for_a_slot(
    make_launcher, catalog, publisher, amqp_vhost
):
    launcher = make_launcher(cap=1)
    results = [
        publish_run("sleep", {"seconds": 3}, trigger="cli", catalog=catalog, publisher=publisher)
        for _ in range(4)
    ]
    step_until(launcher, lambda: launcher.stats.accepted == 4, timeout=10)
    assert len(launcher.running) == 1 and len(launcher.pending) == 3
    assert queue_counts(amqp_vhost) == (0, 0)  # nothing ready, nothing unacked: all four acked
    assert max(launcher.stats.ack_seconds) < 1.0
    assert RunLog.select().where(RunLog.status == "queued").count() == 3
    assert {r.run_id for r in results} == set(launcher.pending) | set(launcher.running)


def test_an_acked_run_whose_claim_meets_a_database_error_stays_first_in_line(
    make_launcher, catalog, monkeypatch
):
    from runs import launcher as launcher_module

    launcher = make_launcher(cap=1)
    first = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    second = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    launcher.pending[first.run_id] = 1  # as its acked delivery left it
    launcher.pending[second.run_id] = 1
    real_claim = launcher_module.claim

    def database_gone(*args, **kwargs):
        raise peewee.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(launcher_module, "claim", database_gone)
    with pytest.raises(peewee.OperationalError):
        launcher.start_pending()
    assert list(launcher.pending) == [first.run_id, second.run_id]  # not dropped until a rescan
    monkeypatch.setattr(launcher_module, "claim", real_claim)
    step_until(launcher, lambda: _final(first.run_id) and _final(second.run_id), timeout=30)
    assert {RunLog.get_by_id(r.run_id).status for r in (first, second)} == {"succeeded"}


def test_an_initial_attempt_past_expires_at_ends_skipped_expired_without_a_process(
    make_launcher, catalog, publisher, trace_dir
):
    launcher = make_launcher()
    result = publish_run("noop", {}, trigger="cli", catalog=catalog, publisher=None)
    RunLog.update(expires_at=utcnow() - timedelta(seconds=1)).where(RunLog.id == result.run_id).execute()
    drain_job_runs(publisher=publisher)
    step_until(launcher, lambda: _final(result.run_id))
    run = RunLog.get_by_id(result.run_id)
    assert (run.status, run.reason, run.started_at, run.pid) == ("skipped", SkipReason.EXPIRED, None, None)
    assert read_traces(trace_dir) == []


def test_a_retry_of_an_attempt_that_already_started_keeps_its_budget_past_expires_at(
    make_launcher, catalog, publisher, trace_dir
):
    launcher = make_launcher()
    params = {"succeed_on_attempt": 2}
    result = publish_run("flaky", params, trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: RunLog.get_by_id(result.run_id).first_started_at is not None)
    # The run expires while its first attempt runs; the retry must still start.
    RunLog.update(expires_at=utcnow() - timedelta(seconds=1)).where(RunLog.id == result.run_id).execute()
    step_until(launcher, lambda: _final(result.run_id))
    run = RunLog.get_by_id(result.run_id)
    assert (run.status, run.attempt, run.exit_code) == ("succeeded", 2, 0)
    assert sorted(t["attempt"] for t in read_traces(trace_dir)) == ["1", "2"]


def test_overlap_forbid_ends_a_second_run_skipped_overlap(make_launcher, catalog, publisher, trace_dir):
    launcher = make_launcher(cap=4)
    params = {"seconds": 2}
    first = publish_run("sleep_exclusive", params, trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: RunLog.get_by_id(first.run_id).status == "running")
    second = publish_run("sleep_exclusive", params, trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: _final(second.run_id))
    skipped = RunLog.get_by_id(second.run_id)
    assert (skipped.status, skipped.reason, skipped.pid) == ("skipped", SkipReason.OVERLAP, None)
    assert first.run_id in skipped.error
    step_until(launcher, lambda: _final(first.run_id))
    assert RunLog.get_by_id(first.run_id).status == "succeeded"
    assert [t["run_id"] for t in read_traces(trace_dir)] == [first.run_id]


def test_overlap_allow_runs_two_at_once(make_launcher, catalog, publisher):
    launcher = make_launcher(cap=4)
    runs = [
        publish_run("sleep", {"seconds": 1}, trigger="cli", catalog=catalog, publisher=publisher)
        for _ in "ab"
    ]
    step_until(launcher, lambda: len(launcher.running) == 2)
    step_until(launcher, lambda: all(_final(r.run_id) for r in runs))
    assert {RunLog.get_by_id(r.run_id).status for r in runs} == {"succeeded"}


def test_a_failing_run_is_retried_within_its_budget_then_fails(make_launcher, catalog, publisher, trace_dir):
    launcher = make_launcher()
    params = {"succeed_on_attempt": 9, "exit_code": 4}
    result = publish_run("flaky", params, trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: _final(result.run_id))
    run = RunLog.get_by_id(result.run_id)
    assert (run.status, run.attempt, run.exit_code, run.retry_budget) == ("failed", 3, 4, 2)
    assert sorted(t["attempt"] for t in read_traces(trace_dir)) == ["1", "2", "3"]


def test_a_run_that_succeeds_on_a_retry_ends_succeeded(make_launcher, catalog, publisher, trace_dir):
    launcher = make_launcher()
    params = {"succeed_on_attempt": 3}
    result = publish_run("flaky", params, trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: _final(result.run_id))
    run = RunLog.get_by_id(result.run_id)
    assert (run.status, run.attempt, run.exit_code) == ("succeeded", 3, 0)


def test_a_job_without_retries_fails_on_its_first_exit(make_launcher, catalog, publisher):
    launcher = make_launcher()
    result = publish_run("fail", trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: _final(result.run_id))
    run = RunLog.get_by_id(result.run_id)
    assert (run.status, run.attempt, run.exit_code) == ("failed", 1, 1)


def test_chain_successors_are_published_on_success(make_launcher, catalog, publisher, trace_dir):
    launcher = make_launcher()
    head = publish_run("chain_extract", {}, trigger="cli", catalog=catalog, publisher=publisher)

    def chain_done() -> bool:
        load = RunLog.get_or_none(RunLog.job == "chain_load")
        return load is not None and _final(str(load.id))

    step_until(launcher, chain_done)
    extract = RunLog.get_by_id(head.run_id)
    transform = RunLog.get(RunLog.job == "chain_transform")
    load = RunLog.get(RunLog.job == "chain_load")
    assert [r.status for r in (extract, transform, load)] == ["succeeded"] * 3
    assert transform.trigger == load.trigger == Trigger.CHAIN
    assert transform.dedupe_key == f"chain_transform@{head.run_id}"
    assert load.dedupe_key == f"chain_load@{head.run_id}"
    assert (transform.parent_id, load.parent_id) == (extract.id, transform.id)
    traces = {t["job_name"].split("@")[0]: t for t in read_traces(trace_dir)}
    assert traces["chain_load"]["parent_id"] == str(transform.id)
    assert traces["chain_load"]["trigger"] == "chain"


def test_a_failed_run_publishes_no_successor(make_launcher, catalog, publisher):
    launcher = make_launcher()
    head = publish_run("chain_extract", trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: RunLog.get_by_id(head.run_id).status == "running")
    # the process is killed: exit 137, no retry budget
    os.killpg(launcher.running[head.run_id].pid, signal.SIGKILL)
    step_until(launcher, lambda: _final(head.run_id))
    assert RunLog.get_by_id(head.run_id).status == "failed"
    assert RunLog.select().where(RunLog.job == "chain_transform").count() == 0


def test_a_stale_command_is_acked_and_dropped(make_launcher, catalog, publisher, amqp_vhost):
    launcher = make_launcher()
    result = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    RunLog.update(status=RunStatus.SUCCEEDED.value).where(RunLog.id == result.run_id).execute()
    stale = RunCommand(run_id=result.run_id, job="noop", attempt=1, trigger="cli", dedupe_key=result.run_id)
    wrong_attempt = RunCommand(run_id=result.run_id, job="noop", attempt=5, trigger="cli", dedupe_key="x")
    publisher.publish_many([command_message(stale), command_message(wrong_attempt)])
    step_until(launcher, lambda: launcher.stats.stale == 2, timeout=10)
    assert launcher.stats.started == 0
    assert read_messages(url=amqp_vhost, queue=JOB_RUNS) == []


def test_a_delivery_that_is_not_a_run_command_is_set_aside(make_launcher, publisher, amqp_vhost):
    launcher = make_launcher()
    publisher.publish(OutgoingMessage(queue=JOB_RUNS, body={"hello": 1}, message_id="junk"))
    step_until(launcher, lambda: queue_counts(amqp_vhost) == (0, 0), timeout=10)
    assert (launcher.stats.accepted, launcher.stats.rejected) == (0, 1)
    [aside] = read_set_aside(amqp_vhost)
    assert aside.message_id == "junk" and "attempt must be" in aside.headers["x-kickoff-reason"]


def test_queued_runs_reach_the_launcher_without_a_command(make_launcher, catalog):
    # publisher None: the command was never sent; the launcher's rebuild finds the row
    result = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    launcher = make_launcher()
    launcher.recover()
    assert list(launcher.pending) == [result.run_id]
    step_until(launcher, lambda: _final(result.run_id))
    assert RunLog.get_by_id(result.run_id).status == "succeeded"


def test_the_launcher_starts_queued_runs_while_job_runs_is_missing(make_launcher, catalog, amqp_vhost):
    with AmqpPublisher(url=amqp_vhost) as admin:
        admin.delete_queue(JOB_RUNS)
    launcher = make_launcher()
    result = publish_run("noop", trigger="cli", catalog=catalog, publisher=launcher.publisher)
    assert not result.published  # passive declare failed: the command waits in the outbox
    step_until(launcher, lambda: _final(result.run_id))
    assert RunLog.get_by_id(result.run_id).status == "succeeded"
    assert not launcher.consumer.connected
