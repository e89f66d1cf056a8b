"""Results: the consumer reports into execution_log, the verification settles the action; kickoff actions."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

from cli.main import cli
from config.clock import utcnow
from models.db import database
from publisher.errors import ActionNotFound, TriggerConflictError, TriggerValidationError
from publisher.results import action_state, report_result, verify_results
from publisher.triggers import TriggerStatus, trigger_lineup
from tests.publisher.helpers import counter, lineup

DAY = 86400.0


def _delivered(publisher, settings, key: str = "lineup-7-a") -> str:
    result = trigger_lineup(lineup(idempotency_key=key), publisher=publisher, settings=settings)
    assert result.status is TriggerStatus.QUEUED
    return result.tracking_id


def test_a_reported_success_is_verified_and_the_action_succeeds(db, fresh_queues, publisher, pub_settings):
    tracking_id = _delivered(publisher, pub_settings)
    assert action_state(tracking_id)["verification"] == {"status": "not reported"}
    report_result(
        tracking_id, outcome="succeeded", details={"team_id": "7", "espn_txn": "x1"}, reported_by="worker"
    )
    state = action_state(tracking_id)
    assert state["status"] == "delivered" and state["verification"]["status"] == "reported"
    report = verify_results(result_timeout_seconds=DAY)
    assert report.verified == [tracking_id] and report.failed == {}
    state = action_state(tracking_id)
    assert state["status"] == "succeeded" and state["delivery"]["status"] == "published"
    assert state["verification"]["status"] == "verified" and state["verification"]["reported_by"] == "worker"
    with pytest.raises(TriggerConflictError, match=r"already settled \(verified\)"):
        report_result(tracking_id, outcome="failed")


@pytest.mark.parametrize(
    ("outcome", "details", "reason"),
    [
        ("failed", {"error": "roster locked"}, "roster locked"),
        ("failed", {}, "the worker reported a failure"),
        ("succeeded", {"team_id": "99"}, "result reported for team 99, the action is team 7"),
    ],
    ids=["worker-failure", "failure-without-reason", "wrong-team"],
)
def test_a_result_that_does_not_hold_fails_the_action_with_its_reason(
    db, fresh_queues, publisher, pub_settings, outcome, details, reason
):
    tracking_id = _delivered(publisher, pub_settings)
    report_result(tracking_id, outcome=outcome, details=details)
    assert verify_results(result_timeout_seconds=DAY).failed == {tracking_id: reason}
    state = action_state(tracking_id)
    assert state["status"] == "failed" and state["error"] == reason
    assert state["verification"]["status"] == "failed" and state["verification"]["reason"] == reason


def test_a_result_for_an_action_never_delivered_fails(db, fresh_queues, pub_settings):
    from publisher.amqp import AmqpPublisher

    down = AmqpPublisher(url="amqp://guest:guest@127.0.0.1:1/%2F", connect_timeout=1.0)
    pending = trigger_lineup(lineup(), publisher=down, settings=pub_settings)
    assert pending.status is TriggerStatus.PENDING
    report_result(pending.tracking_id, outcome="succeeded")
    failed = verify_results(result_timeout_seconds=DAY).failed
    assert failed == {pending.tracking_id: "result reported for an action that was never delivered"}


def test_a_delivered_action_without_a_report_fails_after_the_timeout(
    db, fresh_queues, publisher, pub_settings
):
    tracking_id = _delivered(publisher, pub_settings)
    assert verify_results(result_timeout_seconds=DAY).failed == {}
    later = verify_results(result_timeout_seconds=DAY, now=utcnow() + timedelta(seconds=DAY + 1))
    assert later.unreported == [tracking_id] and action_state(tracking_id)["status"] == "failed"


def test_bad_reports_are_refused(db, fresh_queues, publisher, pub_settings):
    tracking_id = _delivered(publisher, pub_settings)
    with pytest.raises(TriggerValidationError, match="outcome"):
        report_result(tracking_id, outcome="done")
    with pytest.raises(ActionNotFound):
        report_result("00000000-0000-0000-0000-000000000000", outcome="succeeded")


def test_a_staged_counter_keeps_its_publication_key_in_outcome_details(db, fresh_queues, publisher):
    counter(publisher, publication_key="pub-1")
    [(result,)] = database.execute_sql(
        "SELECT result FROM execution_log WHERE queue = 'trade_negotiations' AND claim_key = 'pub-1'"
    ).fetchall()
    assert (result if isinstance(result, dict) else json.loads(result)) == {
        "outcome_details": {"publication_key": "pub-1"}
    }


def test_kickoff_actions_result_verify_and_show(db, fresh_queues, publisher, pub_settings, test_env):
    tracking_id = _delivered(publisher, pub_settings)
    runner = CliRunner()
    reported = runner.invoke(
        cli,
        ["actions", "result", tracking_id, "--outcome", "succeeded", "--detail", "team_id=7", "--json"],
        env=test_env,
    )
    assert reported.exit_code == 0, reported.output
    assert json.loads(reported.output)["status"] == "reported"
    verified = runner.invoke(cli, ["actions", "verify", "--json"], env=test_env)
    assert json.loads(verified.output)["verified"] == [tracking_id]
    shown = runner.invoke(cli, ["actions", "show", tracking_id, "--json"], env=test_env)
    state = json.loads(shown.output)
    assert state["status"] == "succeeded" and state["verification"]["status"] == "verified"
    text = runner.invoke(cli, ["actions", "show", tracking_id], env=test_env).output
    assert "verification: verified" in text and "delivery: published" in text
