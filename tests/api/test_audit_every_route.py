"""Issue 35 item 2 against a real `kickoff serve`: triggers, trade claims and action results write entries."""

from __future__ import annotations

from models.audit import audit_entries
from tests.api.test_trades_actions_runs import OFFER
from tests.api.test_triggers import LINEUP


def test_a_trigger_a_trade_approval_and_an_action_result_each_write_an_entry(api):
    sent = api.post("/v1/trigger/lineup", json=LINEUP)
    assert sent.status_code == 202, sent.text
    approved = api.post("/v1/trade/offers/offer-audit/approve", json=OFFER)
    assert approved.status_code in (200, 202), approved.text
    tracking_id = sent.json()["tracking_id"]
    reported = api.post(f"/v1/actions/{tracking_id}/result", json={"outcome": "succeeded"})
    assert reported.status_code == 202, reported.text
    entries = {e.action: e for e in audit_entries()}
    assert (
        entries["trigger.send"].target == "queue:lineup_updates"
        and entries["trigger.send"].after["league_id"] == "L1"
    )
    assert entries["trade.approve"].target_id == "offer-audit" and entries["trade.approve"].who_key_id
    assert entries["action.result"].target_id == tracking_id
    assert {e.request_id is not None for e in entries.values()} == {True}
