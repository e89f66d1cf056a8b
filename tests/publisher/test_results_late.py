"""Late and unsettleable results: kept beside the action, set aside, and the verification goes on."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg2
import pytest
from click.testing import CliRunner

from cli.main import cli
from config.clock import utcnow
from config.errors import DatabaseUnavailable
from config.set_aside import set_aside_count
from models.activity import ActionStatus
from models.db import connect_kwargs_from_url, database
from publisher.actions import get_action, record_result
from publisher.drain import drain_outbox
from publisher.errors import TriggerConflictError
from publisher.results import action_state, report_result, verify_results
from publisher.triggers import TriggerStatus, trigger_lineup, trigger_waiver
from tests.publisher.helpers import ir_move, lineup, waiver

DAY = 86400.0


def _delivered(publisher, settings, key: str) -> str:
    result = trigger_lineup(lineup(idempotency_key=key), publisher=publisher, settings=settings)
    assert result.status is TriggerStatus.QUEUED
    return result.tracking_id


def _reported_succeeded(publisher, settings, *keys: str) -> list[str]:
    """The delivered actions of ``keys``, each then reported succeeded (not yet verified)."""
    tracking_ids = [_delivered(publisher, settings, key) for key in keys]
    for tracking_id in tracking_ids:
        report_result(tracking_id, outcome="succeeded")
    return tracking_ids


def _lose_outcome(tracking_id: str) -> None:
    """Rewrite the result's body without its outcome (by hand, or by an older version)."""
    database.execute_sql(
        "UPDATE execution_log SET body = %s WHERE claim_key = %s",
        (json.dumps({"tracking_id": tracking_id}), f"result:{tracking_id}"),
    )


def _failed_as_unreported(publisher, settings) -> str:
    tracking_id = _delivered(publisher, settings, "lineup-7-late")
    later = verify_results(result_timeout_seconds=DAY, now=utcnow() + timedelta(seconds=DAY + 1))
    assert later.unreported == [tracking_id]
    return tracking_id


def test_a_late_result_first_is_kept_beside_its_failed_action_and_the_results_after_it_are_settled(
    db, fresh_queues, publisher, pub_settings
):
    late = _failed_as_unreported(publisher, pub_settings)
    good = _delivered(publisher, pub_settings, "lineup-7-good")
    bad = _delivered(publisher, pub_settings, "lineup-7-bad")
    answer = report_result(late, outcome="succeeded", details={"team_id": "7"}, reported_by="espn-worker")
    assert answer["late"] is True
    report_result(good, outcome="succeeded", details={"team_id": "7"})
    report_result(bad, outcome="failed", details={"error": "roster locked"})
    counted = set_aside_count("action_verification", "late")

    report = verify_results(result_timeout_seconds=DAY)

    assert report.late == [late] and report.verified == [good] and report.failed == {bad: "roster locked"}
    assert set_aside_count("action_verification", "late") == counted + 1
    state = action_state(late)
    assert state["status"] == "failed" and state["error"].startswith("no result reported within")
    assert state["verification"]["late"] is True and state["verification"]["outcome"] == "succeeded"
    assert (
        state["verification"]["status"] == "verified"
        and state["verification"]["reported_by"] == "espn-worker"
    )
    assert get_action(good).status == ActionStatus.SUCCEEDED and get_action(bad).status == ActionStatus.FAILED
    assert action_state(good)["verification"]["late"] is False
    assert verify_results(result_timeout_seconds=DAY) == type(report)()  # nothing left, nothing raised


def test_a_result_reported_on_a_skipped_action_is_late_and_the_action_stays_skipped(
    db, fresh_queues, publisher, pub_settings
):
    parent = trigger_lineup(ir_move(), publisher=publisher, settings=pub_settings)
    claim = trigger_waiver(
        waiver(after_tracking_id=parent.tracking_id, drop_player_id=None),
        publisher=publisher,
        settings=pub_settings,
    )
    record_result(parent.tracking_id, ActionStatus.FAILED)
    assert drain_outbox(publisher=publisher, settings=pub_settings).cancelled == 1
    good = _delivered(publisher, pub_settings, "lineup-7-good")
    assert report_result(claim.tracking_id, outcome="succeeded")["late"] is True
    report_result(good, outcome="succeeded")

    report = verify_results(result_timeout_seconds=DAY)

    assert report.late == [claim.tracking_id] and report.verified == [good]
    assert get_action(claim.tracking_id).status == ActionStatus.SKIPPED
    # the claim was never delivered: the late result is checked like any other and kept with its reason
    verification = action_state(claim.tracking_id)["verification"]
    assert verification["late"] is True and verification["status"] == "failed"
    assert verification["reason"] == "result reported for an action that was never delivered"


def test_a_result_whose_action_was_settled_by_hand_after_the_report_is_kept_late(
    db, fresh_queues, publisher, pub_settings
):
    tracking_id = _delivered(publisher, pub_settings, "lineup-7-hand")
    assert report_result(tracking_id, outcome="succeeded")["late"] is False
    record_result(tracking_id, ActionStatus.FAILED, error="operator: move undone on ESPN")
    assert verify_results(result_timeout_seconds=DAY).late == [tracking_id]
    state = action_state(tracking_id)
    assert state["status"] == "failed" and state["error"] == "operator: move undone on ESPN"
    assert state["verification"]["late"] is True


def test_a_result_that_cannot_be_settled_is_set_aside_with_its_reason_and_the_pass_goes_on(
    db, fresh_queues, publisher, pub_settings
):
    poisoned, good = _reported_succeeded(publisher, pub_settings, "lineup-7-poison", "lineup-7-good")
    _lose_outcome(poisoned)
    counted = set_aside_count("action_verification", "unsettled")

    report = verify_results(result_timeout_seconds=DAY)

    assert report.verified == [good] and list(report.set_aside) == [poisoned]
    assert "KeyError" in report.set_aside[poisoned]
    assert set_aside_count("action_verification", "unsettled") == counted + 1
    assert get_action(poisoned).status == ActionStatus.DELIVERED
    verification = action_state(poisoned)["verification"]
    assert verification["status"] == "set_aside" and "KeyError" in verification["reason"]
    assert verify_results(result_timeout_seconds=DAY).set_aside == {}  # not tried again every minute


def test_kickoff_actions_show_says_a_result_is_late(db, fresh_queues, publisher, pub_settings, test_env):
    tracking_id = _failed_as_unreported(publisher, pub_settings)
    runner = CliRunner()
    reported = runner.invoke(
        cli, ["actions", "result", tracking_id, "--outcome", "succeeded", "--json"], env=test_env
    )
    assert reported.exit_code == 0, reported.output
    assert json.loads(reported.stdout)["late"] is True
    verified = runner.invoke(cli, ["actions", "verify", "--json"], env=test_env)
    assert json.loads(verified.stdout)["late"] == [tracking_id]
    shown = runner.invoke(cli, ["actions", "show", tracking_id, "--json"], env=test_env)
    assert json.loads(shown.stdout)["verification"]["late"] is True
    text = runner.invoke(cli, ["actions", "show", tracking_id], env=test_env).output
    assert "late: this result was reported after the action was failed" in text
    assert "reason -" in text  # the late result itself holds; the action's own error is on its line


def test_an_unreported_action_settled_meanwhile_is_set_aside_and_the_pass_fails_the_others(
    db, fresh_queues, publisher, pub_settings, monkeypatch
):
    from publisher import results as results_module

    settled_meanwhile = _delivered(publisher, pub_settings, "lineup-7-meanwhile")
    unreported = _delivered(publisher, pub_settings, "lineup-7-unreported")
    real = results_module.record_result

    def an_operator_finishes_it_first(tracking_id, status, *, error=None):
        if tracking_id == settled_meanwhile:  # `kickoff trigger result ... succeeded` from another process
            name, kwargs = connect_kwargs_from_url(pub_settings.database_url)
            with psycopg2.connect(dbname=name, **kwargs) as other, other.cursor() as cur:
                cur.execute(
                    "UPDATE activity_actions SET status = 'succeeded' WHERE tracking_id = %s", (tracking_id,)
                )
            other.close()
        real(tracking_id, status, error=error)

    monkeypatch.setattr(results_module, "record_result", an_operator_finishes_it_first)
    counted = set_aside_count("action_verification", "unsettled")

    report = verify_results(result_timeout_seconds=DAY, now=utcnow() + timedelta(seconds=DAY + 1))

    assert report.unreported == [unreported] and list(report.set_aside) == [settled_meanwhile]
    assert "succeeded" in report.set_aside[settled_meanwhile]
    assert set_aside_count("action_verification", "unsettled") == counted + 1
    assert get_action(settled_meanwhile).status == ActionStatus.SUCCEEDED
    assert get_action(unreported).status == ActionStatus.FAILED


def _settling_waits_for_a_lock(cur, tracking_id: str, lock: int) -> None:
    """Make the verification's write of ``verified`` on this result's row wait for advisory lock ``lock``.

    A row trigger of the test's own database: the one statement of the pass that settles this
    result then waits for a lock another connection holds, as a statement waits behind any lock.
    """
    cur.execute(
        "CREATE FUNCTION test_settle_waits() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF NEW.claim_key = 'result:{tracking_id}' AND NEW.status = 'verified' THEN "
        f"PERFORM pg_advisory_xact_lock({lock}); END IF; RETURN NEW; END $$"
    )
    cur.execute(
        "CREATE TRIGGER test_settle_waits BEFORE UPDATE ON execution_log FOR EACH ROW "
        "EXECUTE FUNCTION test_settle_waits()"
    )


def test_a_database_error_while_settling_one_result_ends_the_pass_and_sets_nothing_aside(
    db, fresh_queues, publisher, pub_settings
):
    good, blocked = _reported_succeeded(publisher, pub_settings, "lineup-7-good", "lineup-7-blocked")
    other = psycopg2.connect(pub_settings.database_url)
    other.autocommit = True
    counted = set_aside_count("action_verification")
    try:
        with other.cursor() as cur:
            _settling_waits_for_a_lock(cur, blocked, lock=7201)
            cur.execute("SELECT pg_advisory_lock(7201)")  # held by this other session
        database.execute_sql("SET lock_timeout = '500ms'")  # the pass's connection gives up waiting
        with pytest.raises(DatabaseUnavailable, match="lock timeout"):
            verify_results(result_timeout_seconds=DAY)
        database.execute_sql("RESET lock_timeout")
        # the pass was undone as a whole: nothing set aside, both results wait for the next pass
        assert set_aside_count("action_verification") == counted
        assert [action_state(t)["verification"]["status"] for t in (good, blocked)] == ["reported"] * 2
        with other.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(7201)")
        report = verify_results(result_timeout_seconds=DAY)
        assert sorted(report.verified) == sorted([good, blocked]) and report.set_aside == {}
        assert get_action(blocked).status == ActionStatus.SUCCEEDED
    finally:
        with other.cursor() as cur:
            cur.execute("DROP TRIGGER IF EXISTS test_settle_waits ON execution_log")
            cur.execute("DROP FUNCTION IF EXISTS test_settle_waits()")
        other.close()


def test_a_result_reported_again_after_it_was_set_aside_is_settled_and_a_settled_one_is_refused(
    db, fresh_queues, publisher, pub_settings
):
    [tracking_id] = _reported_succeeded(publisher, pub_settings, "lineup-7-again")
    _lose_outcome(tracking_id)  # set aside
    assert list(verify_results(result_timeout_seconds=DAY).set_aside) == [tracking_id]

    answer = report_result(tracking_id, outcome="succeeded", details={"team_id": "7"}, reported_by="worker")

    assert answer["status"] == "reported" and answer["late"] is False
    verification = action_state(tracking_id)["verification"]
    assert (verification["status"], verification["reason"]) == ("reported", None)
    assert verify_results(result_timeout_seconds=DAY).verified == [tracking_id]
    assert get_action(tracking_id).status == ActionStatus.SUCCEEDED
    with pytest.raises(TriggerConflictError, match=r"already settled \(verified\)"):
        report_result(tracking_id, outcome="failed")
