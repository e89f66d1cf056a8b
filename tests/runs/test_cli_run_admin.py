"""`kickoff runs cancel|retry|logs`: what each allows, one line when refused, nothing changed then."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.main import cli
from models.run_log import RunLog


@pytest.fixture
def run(db, test_env, publisher):
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, list(args), env=test_env, catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.stdout if "--json" in args else result.output

    return invoke


def published(run) -> str:
    return json.loads(run("runs", "publish", "sleep", "--param", "seconds=1", "--json"))["run_id"]


def test_cancel_ends_a_queued_run_and_refuses_any_other(run):
    run_id = published(run)
    assert json.loads(run("runs", "cancel", run_id, "--json")) == {
        "run_id": run_id,
        "status": "skipped",
        "reason": "cancelled",
    }
    out = run("runs", "cancel", run_id, code=4)
    assert out.strip() == f"Error: run {run_id} is skipped: only a queued run can be cancelled"
    assert "no run" in run("runs", "cancel", "00000000-0000-4000-8000-000000000000", code=2)


def test_retry_queues_the_next_attempt_of_a_failed_or_skipped_run_only(run):
    run_id = published(run)
    out = run("runs", "retry", run_id, code=4)
    assert "is queued: only a failed or skipped run can be retried" in out
    RunLog.update(status="failed", exit_code=3).where(RunLog.id == run_id).execute()
    answer = json.loads(run("runs", "retry", run_id, "--json"))
    assert answer["attempt"] == 2 and answer["status"] == "queued" and answer["published"] is True
    assert RunLog.get_by_id(run_id).status == "queued"
    RunLog.update(status="succeeded").where(RunLog.id == run_id).execute()
    assert "is succeeded" in run("runs", "retry", run_id, code=4)
    assert RunLog.get_by_id(run_id).attempt == 2


def test_logs_prints_the_tail_of_the_current_attempt(run, tmp_path):
    run_id = published(run)
    assert "has no log yet" in run("runs", "logs", run_id, code=1)
    log = tmp_path / "run.log"
    log.write_text("".join(f"line {i}\n" for i in range(10)))
    RunLog.update(log_path=str(log)).where(RunLog.id == run_id).execute()
    assert run("runs", "logs", run_id, "-n", "2").splitlines() == ["line 8", "line 9"]
    doc = json.loads(run("runs", "logs", run_id, "--json"))
    assert doc["lines"][0] == "line 0" and len(doc["lines"]) == 10
    log.unlink()
    assert "cannot read the log" in run("runs", "logs", run_id, code=1)
