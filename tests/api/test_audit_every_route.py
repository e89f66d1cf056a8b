"""Issue 35 item 2 against a real `kickoff serve`: triggers, trade claims and action results write entries."""

from __future__ import annotations

import httpx

from models.audit import audit_entries
from tests.api.conftest import bearer
from tests.api.test_trades_actions_runs import OFFER, trade_queues  # noqa: F401 (a fixture)
from tests.api.test_triggers import LINEUP


def test_a_trigger_a_trade_approval_and_an_action_result_each_write_an_entry(api, trade_queues):  # noqa: F811
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


# -- one audit convention: each trade and trigger route hands audit= to the library, which writes it ----


def _entry(action: str, target_id: str):
    [entry] = [e for e in audit_entries(action=action) if e.target_id == target_id]
    assert entry.who_key_id and entry.request_id, entry  # the route's key and request, handed over
    return entry


def test_offer_approval_writes_trade_approve(api, trade_queues):  # noqa: F811
    assert api.post("/v1/trade/offers/offer-a1/approve", json=OFFER).status_code == 202
    assert _entry("trade.approve", "offer-a1").after == {"league_id": "L1"}


def test_a_decision_writes_trade_decide(api, trade_queues):  # noqa: F811
    body = {"league_id": "L1", "team_id": "7", "decision": "accept", "decision_key": "dk-a1"}
    assert api.post("/v1/trade/incoming/t-a1/decision", json=body).status_code == 202
    assert _entry("trade.decide", "t-a1").after == {"league_id": "L1", "decision": "accept"}


def test_a_counter_writes_trade_counter(api, trade_queues):  # noqa: F811
    body = {
        "league_id": "L1",
        "team_id": "7",
        "publication_key": "c-a1",
        "give_player_ids": ["4034"],
        "receive_player_ids": ["6794"],
    }
    assert api.post("/v1/trade/incoming/t-a2/counter", json=body).status_code == 202
    assert _entry("trade.counter", "t-a2").after == {"league_id": "L1", "publication_key": "c-a1"}


def test_a_decision_retry_writes_trade_retry_as_the_cli_does(broken_server, keys, db):
    """A decision the broker never got is pending; its retry is audited by retry_claim (trade.retry)."""
    headers = bearer(keys["operator"])
    body = {"league_id": "L1", "team_id": "7", "decision": "reject"}
    with httpx.Client(base_url=broken_server.url, headers=headers, timeout=60) as client:
        decided = client.post("/v1/trade/incoming/t-a3/decision", json=body)
        assert decided.status_code == 202 and decided.json()["status"] == "pending", decided.text
        retried = client.post("/v1/trade/incoming/t-a3/decision/retry", json={"league_id": "L1"})
    assert retried.status_code == 202 and retried.json()["status"] == "pending", retried.text
    entry = _entry("trade.retry", "trade_responses/t-a3")
    assert entry.before == {"status": "pending", "league_id": "L1"}
    assert entry.after == {"message_id": decided.json()["message_id"]}


def test_a_trigger_route_writes_trigger_send(api):
    body = {**LINEUP, "idempotency_key": "lineup-a1"}
    assert api.post("/v1/trigger/lineup", json=body).status_code == 202
    sent = audit_entries(action="trigger.send")
    entries = [e for e in sent if e.after.get("idempotency_key") == "lineup-a1"]
    assert [(e.target, e.after["league_id"], bool(e.who_key_id)) for e in entries] == [
        ("queue:lineup_updates", "L1", True)
    ]


def test_rumor_action_writes_one_trigger_rumor_action_entry_and_none_per_move(api):
    body = {
        "league_id": "L7",
        "team_id": "7",
        "season": 2026,
        "week": 3,
        "roster": {"3918298": "RB"},
        "signals": [{"player_id": 3918298, "kind": "ruled_out", "confidence": 0.9}],
    }
    answer = api.post("/v1/trigger/rumor-action", json=body)
    assert answer.status_code == 202, answer.text
    assert _entry("trigger.rumor_action", "L7").after == {"team_id": "7", "signals": 1}
    assert [e for e in audit_entries(action="trigger.send") if e.after.get("league_id") == "L7"] == []
