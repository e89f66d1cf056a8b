"""run_scope(): the outermost scope adopts RUN_ID's row, nested scopes record child runs."""

from __future__ import annotations

import uuid

import pytest

from client.trigger_client import TriggerClient
from models.run_log import RunLog, RunStatus
from publisher.amqp import AmqpPublisher
from publisher.run_context import get_run_id
from runs.errors import RunNotFound
from runs.publish import publish_run
from runs.scope import run_scope
from tests.runs.conftest import read_traces, step_until


def test_the_outermost_scope_adopts_the_run_id_row_and_keeps_the_catalog_job_name(
    db, catalog, settings, monkeypatch
):
    queued = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    monkeypatch.setenv("RUN_ID", queued.run_id)
    assert get_run_id() is None
    with run_scope("some-other-name", settings=settings) as scope:
        assert (scope.run_id, scope.job, scope.adopted) == (queued.run_id, "noop", True)
        assert get_run_id() == queued.run_id
    assert get_run_id() is None
    assert RunLog.select().count() == 1
    assert RunLog.get_by_id(queued.run_id).job == "noop"


def test_nested_scopes_record_child_runs_of_the_enclosing_run(db, catalog, settings, monkeypatch):
    queued = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    monkeypatch.setenv("RUN_ID", queued.run_id)
    with run_scope("outer", settings=settings):
        with run_scope("step-a", settings=settings) as a:
            assert get_run_id() == a.run_id
            with run_scope("step-a1", settings=settings) as a1:
                pass
        assert get_run_id() == queued.run_id
        with pytest.raises(ValueError), run_scope("step-b", settings=settings) as b:
            raise ValueError("bad row")
    rows = {r.job: r for r in RunLog.select().where(RunLog.trigger == "scope")}
    assert set(rows) == {"step-a", "step-a1", "step-b"}
    assert str(rows["step-a"].parent_id) == queued.run_id
    assert str(rows["step-a1"].parent_id) == a.run_id
    assert rows["step-a"].status == RunStatus.SUCCEEDED and rows["step-a"].duration_seconds is not None
    assert rows["step-b"].status == RunStatus.FAILED and rows["step-b"].error == "ValueError: bad row"
    assert str(rows["step-b"].id) == b.run_id and a1.adopted is False


def test_a_scope_outside_any_launched_run_records_its_own_run(db, settings, monkeypatch):
    monkeypatch.delenv("RUN_ID", raising=False)
    with run_scope("by-hand", settings=settings) as scope:
        assert scope.adopted is False and get_run_id() == scope.run_id
    row = RunLog.get_by_id(scope.run_id)
    assert (row.job, row.trigger, row.status, row.parent_id) == ("by-hand", "scope", "succeeded", None)


def test_a_run_id_naming_no_row_is_run_not_found(db, settings, monkeypatch):
    monkeypatch.setenv("RUN_ID", str(uuid.uuid4()))
    with pytest.raises(RunNotFound), run_scope("x", settings=settings):
        pass


def test_a_launched_job_process_adopts_its_row_and_records_its_steps(
    make_launcher, catalog, publisher, trace_dir
):
    launcher = make_launcher()
    params = {"steps": ["extract", "load"]}
    result = publish_run("scoped", params, trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: RunLog.get_by_id(result.run_id).status not in ("queued", "running"))
    run = RunLog.get_by_id(result.run_id)
    assert (run.status, run.job) == ("succeeded", "scoped")
    [trace] = read_traces(trace_dir)
    assert trace["outer"] == trace["scopes"]["outer"] == trace["scopes"]["after"] == result.run_id
    children = {r.job: r for r in RunLog.select().where(RunLog.parent == run.id)}
    assert set(children) == {"extract", "load"}
    assert {c.status for c in children.values()} == {"succeeded"}
    assert str(children["load"].id) == trace["scopes"]["load"]


def test_trigger_client_sends_the_innermost_scopes_run_id_as_x_run_id(db, catalog, settings, monkeypatch):
    queued = publish_run("noop", trigger="cli", catalog=catalog, publisher=None)
    monkeypatch.setenv("RUN_ID", queued.run_id)
    client = TriggerClient(publisher=AmqpPublisher(url=settings.amqp_url), settings=settings)
    assert client.headers() == {}
    with run_scope("outer", settings=settings):
        assert client.headers() == {"X-Run-Id": queued.run_id}
        with run_scope("step", settings=settings) as step:
            assert client.headers() == {"X-Run-Id": step.run_id}
    assert client.headers() == {}
