"""/v1/trade/reconcile over HTTP: the waiting claims (read key) and each choice (operator key); the metric."""

from __future__ import annotations

import httpx
import pytest

from api.keys import list_keys
from publisher import trades
from publisher.amqp import AmqpPublisher
from publisher.trades import redeliver_trades
from tests.api.conftest import bearer
from tests.api.test_health_metrics import _samples
from tests.publisher.trade_claims import assert_resent, pending_offer, poison, uncertain_offer


def _operator_key_id() -> str:
    return next(k.id for k in list_keys() if k.name == "test-operator")


def test_a_read_key_lists_the_claims_waiting_for_an_operator(api_server, api, keys, amqp_vhost):
    lost = uncertain_offer(amqp_vhost, offer_key="offer-1")
    pending_offer(offer_key="offer-2")  # the drain's to send, not the operator's
    answer = httpx.get(api_server.url + "/v1/trade/reconcile", headers=bearer(keys["read"]), timeout=60)
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["count"] == 1
    [claim] = doc["claims"]
    assert (claim["queue"], claim["claim_key"], claim["status"]) == (
        "trade_submissions",
        "offer-1",
        "uncertain",
    )
    assert claim["message_id"] == lost.message_id and "not confirmed" in claim["error"]


@pytest.mark.parametrize(
    ("choice", "status", "sent"),
    [
        pytest.param("published", "resolved", False, id="published"),
        pytest.param("republish", "published", True, id="republish"),
        pytest.param("cancel", "cancelled", False, id="cancel"),
    ],
)
def test_each_reconcile_choice_through_the_api(api, amqp_vhost, read_queue, choice, status, sent):
    lost = uncertain_offer(amqp_vhost, offer_key="offer-1")
    answer = api.post(
        "/v1/trade/reconcile",
        json={"queue": "trade_submissions", "claim_key": "offer-1", "resolution": choice},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["status"], body["resolution"]) == (status, choice)
    assert body["resolved_by"] == f"api key {_operator_key_id()}"
    assert trades.get_entry("trade_submissions", "offer-1").status == status
    assert_resent(read_queue("trade_submissions"), lost, sent=sent)
    again = api.post(
        "/v1/trade/reconcile",
        json={"queue": "trade_submissions", "claim_key": "offer-1", "resolution": choice},
    )
    assert again.status_code == 409 and "not waiting for an operator" in again.json()["error"]


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        pytest.param(
            {"queue": "trade_submissions", "claim_key": "nope", "resolution": "cancel"},
            404,
            None,
            id="unknown",
        ),
        pytest.param(
            {"queue": "lineup_updates", "claim_key": "k", "resolution": "cancel"}, 422, "queue", id="queue"
        ),
        pytest.param(
            {"queue": "trade_submissions", "claim_key": "k", "resolution": "not-published"},
            422,
            "resolution",
            id="resolution",
        ),
        pytest.param(
            {"queue": "trade_submissions", "claim_key": "", "resolution": "cancel"},
            422,
            "claim_key",
            id="key",
        ),
    ],
)
def test_a_reconcile_request_for_no_claim_or_with_a_bad_field_is_refused(api, body, code, field):
    answer = api.post("/v1/trade/reconcile", json=body)
    assert answer.status_code == code, answer.text
    if field:
        assert answer.json()["field"] == field
    else:
        assert "no execution_log claim for 'nope' on trade_submissions" in answer.json()["error"]


def test_a_read_key_cannot_reconcile(api_server, keys, api, amqp_vhost):
    uncertain_offer(amqp_vhost, offer_key="offer-1")
    answer = httpx.post(
        api_server.url + "/v1/trade/reconcile",
        json={"queue": "trade_submissions", "claim_key": "offer-1", "resolution": "cancel"},
        headers=bearer(keys["read"]),
        timeout=60,
    )
    assert answer.status_code == 403
    assert trades.get_entry("trade_submissions", "offer-1").status == "uncertain"


def test_metrics_count_trade_claims_by_status_including_set_aside_and_uncertain(api_server, api, amqp_vhost):
    uncertain_offer(amqp_vhost, offer_key="offer-1")
    pending_offer(offer_key="offer-spoiled")
    poison("offer-spoiled", body="not an object")
    with AmqpPublisher(url=amqp_vhost) as pub:
        assert redeliver_trades(publisher=pub).set_aside == 1
    samples = _samples(httpx.get(api_server.url + "/metrics", timeout=60).text)
    assert samples[("kickoff_trade_claims", (("status", "set_aside"),))] == 1
    assert samples[("kickoff_trade_claims", (("status", "uncertain"),))] == 1
    assert samples[("kickoff_trade_claims", (("status", "pending"),))] == 0
    assert samples[("kickoff_metrics_source_up", (("source", "trades"),))] == 1


def test_the_reconcile_body_takes_the_publishers_trade_queues_and_choices():
    from api.schemas import ReconcileBody
    from publisher.queues import TRADE_QUEUES
    from publisher.trade_reconcile import Resolution

    properties = ReconcileBody.model_json_schema()["properties"]
    assert properties["queue"]["enum"] == list(TRADE_QUEUES)
    assert properties["resolution"]["enum"] == [r.value for r in Resolution]
