"""Trade, action and run routes over HTTP."""

from __future__ import annotations

import uuid

import httpx
import pytest

from api.routes.trades import STATUS_CODES
from publisher.amqp import AmqpPublisher
from publisher.queues import TRADE_QUEUES
from publisher.results import verify_results
from publisher.trades import TradeStatus
from tests.api.conftest import bearer
from tests.api.test_triggers import LINEUP


@pytest.fixture
def trade_queues(amqp_vhost, fresh_queues):
    with AmqpPublisher(url=amqp_vhost) as admin:
        admin.declare_durable(TRADE_QUEUES)


def test_every_trade_status_has_a_status_code():
    assert set(STATUS_CODES) == set(TradeStatus)


OFFER = {
    "league_id": "L1",
    "team_id": "7",
    "counterparty_team_id": "3",
    "give_player_ids": [3918298],
    "receive_player_ids": [4241457],
}


def test_offer_approval_is_202_then_200_duplicate(api, trade_queues, read_queue):
    first = api.post("/v1/trade/offers/offer-1/approve", json=OFFER)
    assert first.status_code == 202, first.text
    assert first.json()["status"] == "published" and first.json()["claim_key"] == "offer-1"
    again = api.post("/v1/trade/offers/offer-1/approve", json=OFFER)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    assert again.json()["message_id"] == first.json()["message_id"]
    ((body, _),) = read_queue("trade_submissions")
    assert body["offer_key"] == "offer-1"


def test_offer_with_sleeper_ids_is_422(api, trade_queues):
    r = api.post("/v1/trade/offers/offer-2/approve", json={**OFFER, "give_player_ids": ["4034"]})
    assert r.status_code == 422 and r.json()["field"] == "give_player_ids[0]"


def test_decision_keys_on_the_trade_id_and_retry_needs_a_failed_one(api, trade_queues, read_queue):
    body = {"league_id": "L1", "team_id": "7", "decision": "accept"}
    r = api.post("/v1/trade/incoming/t-9/decision", json=body)
    assert r.status_code == 202 and r.json()["claim_key"] == "t-9"
    assert api.post("/v1/trade/incoming/t-9/decision", json=body).status_code == 200
    retry = api.post("/v1/trade/incoming/t-9/decision/retry")
    assert retry.status_code == 409 and "only a failed or pending decision" in retry.json()["error"]
    assert api.post("/v1/trade/incoming/t-404/decision/retry").status_code == 404
    bad = api.post("/v1/trade/incoming/t-9/decision", json={**body, "decision": "maybe"})
    assert bad.status_code == 422 and bad.json()["field"] == "decision"
    assert len(read_queue("trade_responses")) == 1


def test_counter_is_staged_with_sleeper_ids(api, trade_queues, read_queue):
    body = {
        "league_id": "L1",
        "team_id": "7",
        "publication_key": "c-1",
        "give_player_ids": ["4034"],
        "receive_player_ids": ["6794"],
    }
    r = api.post("/v1/trade/incoming/t-9/counter", json=body)
    assert r.status_code == 202, r.text
    ((sent, _),) = read_queue("trade_negotiations")
    assert sent["trade_id"] == "t-9" and sent["give_player_ids"] == ["4034"]


def test_action_state_result_and_verification(api, keys, api_server):
    read, trigger = bearer(keys["read"]), bearer(keys["trigger"])
    created = httpx.post(f"{api_server.url}/v1/trigger/lineup", json=LINEUP, headers=trigger, timeout=60)
    tracking_id = created.json()["tracking_id"]  # the trigger key's action: that key reports its result
    shown = httpx.get(f"{api_server.url}/v1/actions/{tracking_id}", headers=read, timeout=60)
    assert shown.status_code == 200
    state = shown.json()
    assert state["tracking_id"] == tracking_id and state["queue"] == "lineup_updates"
    assert state["delivery"]["status"] == "published"
    assert state["verification"] == {"status": "not reported"}
    url = f"{api_server.url}/v1/actions/{tracking_id}/result"
    body = {"outcome": "succeeded", "details": {"team_id": "7"}, "reported_by": "espn-worker"}
    r = httpx.post(url, json=body, headers=trigger, timeout=60)
    assert r.status_code == 202, r.text
    assert r.json() == {
        "tracking_id": tracking_id,
        "status": "reported",
        "outcome": "succeeded",
        "late": False,
    }
    assert verify_results(result_timeout_seconds=3600).verified == [tracking_id]
    state = httpx.get(f"{api_server.url}/v1/actions/{tracking_id}", headers=read, timeout=60).json()
    assert state["status"] == "succeeded" and state["verification"]["status"] == "verified"
    again = httpx.post(url, json=body, headers=trigger, timeout=60)
    assert again.status_code == 409
    bad = httpx.post(url, json={"outcome": "great"}, headers=trigger, timeout=60)
    assert bad.status_code == 422 and bad.json()["field"] == "outcome"
    missing = f"{api_server.url}/v1/actions/{uuid.uuid4()}"
    assert httpx.get(missing, headers=read, timeout=60).status_code == 404
    r = httpx.post(missing + "/result", json={"outcome": "failed"}, headers=trigger, timeout=60)
    assert r.status_code == 404


def test_runs_publish_list_show(api, keys, api_server):
    r = httpx.post(
        f"{api_server.url}/v1/runs",
        json={"job": "noop", "params": {}},
        headers=bearer(keys["trigger"]),
        timeout=60,
    )
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "queued"
    run_id = r.json()["run_id"]
    listed = api.get("/v1/runs", params={"job": "noop"}).json()
    assert [run["run_id"] for run in listed["runs"]] == [run_id]
    shown = api.get(f"/v1/runs/{run_id}").json()
    assert shown["job"] == "noop" and shown["trigger"] == "manual"
    assert api.get(f"/v1/runs/{uuid.uuid4()}").status_code == 404
    assert api.get("/v1/runs/not-a-uuid").status_code == 404
    assert api.get("/v1/runs", params={"status": "nonsense"}).status_code == 422


def test_run_publish_refusals_are_422(api):
    unknown = api.post("/v1/runs", json={"job": "no_such_job", "params": {}})
    assert unknown.status_code == 422 and unknown.json()["field"] == "job"
    bad = api.post("/v1/runs", json={"job": "sleep", "params": {"seconds": "long"}})
    assert bad.status_code == 422 and bad.json()["field"] == "params"
    extra = api.post("/v1/runs", json={"job": "noop", "params": {}, "priority": 1})
    assert extra.status_code == 422 and extra.json()["field"] == "priority"
