"""One bad job_runs delivery never stops the launcher: it is set aside on job_runs.XQ with its
reason, counted and logged, and the runs queued behind it start (real RabbitMQ and PostgreSQL)."""

from __future__ import annotations

import uuid

import httpx
from prometheus_client.parser import text_string_to_metric_families

from config.set_aside import METRIC, set_aside_count
from harness.ports import free_port
from models.run_log import RunLog
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.queues import JOB_RUNS
from runs.publish import publish_run
from tests.runs.conftest import queue_counts, read_set_aside, step_until
from tests.waiting import wait_for


def _command(**change: object) -> dict[str, object]:
    run_id = str(uuid.uuid4())
    return {"run_id": run_id, "job": "noop", "attempt": 1, "trigger": "cli", "dedupe_key": run_id} | change


def _poison() -> list[OutgoingMessage]:
    """Three deliveries no launcher can start: not JSON, a run id that is not a UUID, an unknown job."""
    return [
        OutgoingMessage(queue=JOB_RUNS, body={}, raw=b"{not json", message_id="poison-json"),
        OutgoingMessage(queue=JOB_RUNS, body=_command(run_id="not-a-uuid"), message_id="poison-uuid"),
        OutgoingMessage(queue=JOB_RUNS, body=_command(job="no_such_job"), message_id="poison-job"),
    ]


def _succeeded(run_id: str) -> bool:
    return RunLog.get_by_id(run_id).status == "succeeded"


def test_malformed_commands_ahead_of_a_queued_run_are_set_aside_and_the_run_starts(
    make_launcher, catalog, publisher, amqp_vhost
):
    launcher = make_launcher()
    before = set_aside_count("launcher")
    assert all(o.confirmed for o in publisher.publish_many(_poison()))
    run = publish_run("noop", trigger="cli", catalog=catalog, publisher=publisher)
    assert run.published  # its command waits behind the three bad ones

    step_until(launcher, lambda: _succeeded(run.run_id))

    assert (launcher.stats.rejected, launcher.stats.accepted) == (3, 1)
    assert queue_counts(amqp_vhost) == (0, 0)  # every delivery settled
    aside = read_set_aside(amqp_vhost)
    assert [(m.message_id, m.headers["x-kickoff-kind"]) for m in aside] == [
        ("poison-json", "not_json"),
        ("poison-uuid", "invalid"),
        ("poison-job", "unknown_job"),
    ]
    assert aside[0].body == b"{not json"  # the delivery as it came, to inspect or send again
    assert "not JSON" in aside[0].headers["x-kickoff-reason"]
    assert "run_id 'not-a-uuid' is not a UUID" in aside[1].headers["x-kickoff-reason"]
    assert "no job 'no_such_job'" in aside[2].headers["x-kickoff-reason"]
    assert {m.headers["x-kickoff-host"] for m in aside} == {launcher.host}
    assert set_aside_count("launcher") - before == 3


def test_a_set_aside_delivery_is_logged_once_with_its_reason(make_launcher, publisher, caplog):
    launcher = make_launcher()
    publisher.publish(OutgoingMessage(queue=JOB_RUNS, body=_command(attempt="1"), message_id="poison-type"))
    with caplog.at_level("WARNING", logger="config.set_aside"):
        step_until(launcher, lambda: launcher.stats.rejected == 1, timeout=15)
    [line] = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert "poison-type" in line and "attempt must be an integer from 1, got '1'" in line


def test_a_kickoff_launcher_process_outlives_a_malformed_command_and_serves_the_count(
    db, catalog, publisher, amqp_vhost, start_launcher
):
    port = free_port()
    assert all(o.confirmed for o in publisher.publish_many(_poison()))
    run = publish_run("noop", trigger="cli", catalog=catalog, publisher=publisher)
    launcher = start_launcher(
        cap=2, env={"LAUNCHER_METRICS_PORT": str(port), "LAUNCHER_RESCAN_INTERVAL_SECONDS": "600"}
    )

    wait_for(lambda: _succeeded(run.run_id), timeout=90, what="the noop run behind the bad commands")
    assert launcher.poll() is None, "the launcher exited"
    assert [m.message_id for m in read_set_aside(amqp_vhost)] == ["poison-json", "poison-uuid", "poison-job"]

    text = httpx.get(f"http://127.0.0.1:{port}/", timeout=5).text
    counted = {
        (s.labels["loop"], s.labels["kind"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == METRIC
    }
    assert counted == {
        ("launcher", "not_json"): 1.0,
        ("launcher", "invalid"): 1.0,
        ("launcher", "unknown_job"): 1.0,
    }
    assert queue_counts(amqp_vhost) == (0, 0)


def test_a_bad_delivery_whose_copy_is_not_confirmed_is_requeued_not_lost(
    make_launcher, publisher, amqp_vhost, caplog
):
    launcher = make_launcher()
    working = launcher.publisher
    launcher.publisher = AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=0.5)
    publisher.publish(OutgoingMessage(queue=JOB_RUNS, body=_command(run_id="x"), message_id="poison-held"))
    with caplog.at_level("WARNING", logger="runs.launcher"):
        step_until(launcher, lambda: "cannot set it aside" in caplog.text, timeout=15)
    assert launcher.stats.rejected == 0
    assert sum(queue_counts(amqp_vhost)) == 1  # back on job_runs (or redelivered, unacked)

    launcher.publisher.close()
    launcher.publisher = working
    step_until(launcher, lambda: launcher.stats.rejected == 1, timeout=30)
    assert [m.message_id for m in read_set_aside(amqp_vhost)] == ["poison-held"]
    assert queue_counts(amqp_vhost) == (0, 0)
