"""Trigger routes over HTTP: 202 queued/pending, 200 duplicate, 422 naming the field, 409, 503."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import httpx
import psycopg2

from config.clock import utcnow
from models.activity import ActionStatus
from publisher.actions import get_action, record_result
from publisher.trace import new_traceparent
from tests.api.conftest import bearer

TEAM = {"league_id": "L1", "team_id": "7"}
LINEUP = {**TEAM, "swaps": [{"player_id": 3918298, "to_slot": "BN"}]}
NEW = {"queued", "pending"}


def draft(**over):
    body = {**TEAM, "pick_number": 12, "espn_id": 4241457}
    body.update(over)
    return body


def test_lineup_is_accepted_and_published_with_the_header_traceparent(api, read_queue):
    tp = new_traceparent()
    r = api.post("/v1/trigger/lineup", json=LINEUP, headers={"traceparent": tp})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] in NEW and uuid.UUID(body["tracking_id"])
    messages = read_queue("lineup_updates")
    assert len(messages) == 1
    sent, props = messages[0]
    assert sent["tracking_id"] == body["tracking_id"] and sent["traceparent"] == tp
    assert props.headers["traceparent"] == tp


def test_the_body_traceparent_wins_over_the_header(api, read_queue):
    mine, header = new_traceparent(), new_traceparent()
    r = api.post("/v1/trigger/lineup", json={**LINEUP, "traceparent": mine}, headers={"traceparent": header})
    assert r.status_code == 202
    ((sent, props),) = read_queue("lineup_updates")
    assert sent["traceparent"] == mine and props.headers["traceparent"] == mine


def test_an_invalid_traceparent_header_is_ignored(api, read_queue):
    r = api.post("/v1/trigger/lineup", json=LINEUP, headers={"traceparent": "00-nonsense"})
    assert r.status_code == 202
    ((sent, _),) = read_queue("lineup_updates")
    assert sent["traceparent"] is None


def test_a_repeat_with_a_held_key_is_200_duplicate_with_the_original_tracking_id(api):
    body = {**LINEUP, "idempotency_key": "k-1", "decision_inputs": {"season": 2026, "week": 3}}
    first = api.post("/v1/trigger/lineup", json=body)
    again = api.post("/v1/trigger/lineup", json=body)
    assert first.status_code == 202
    assert again.status_code == 200
    assert again.json() == {**again.json(), "status": "duplicate", "tracking_id": first.json()["tracking_id"]}


def test_x_run_id_links_the_action_to_the_run(api):
    run_id = str(uuid.uuid4())
    r = api.post("/v1/trigger/lineup", json=LINEUP, headers={"X-Run-Id": run_id})
    assert r.status_code == 202
    assert get_action(r.json()["tracking_id"]).run_id == run_id
    bad = api.post("/v1/trigger/lineup", json=LINEUP, headers={"X-Run-Id": "not-a-run"})
    assert bad.status_code == 422 and bad.json()["field"] == "X-Run-Id"


def test_a_sleeper_id_on_an_espn_route_is_422_naming_the_field(api, read_queue):
    body = {**LINEUP, "swaps": [{"player_id": "4034", "to_slot": "BN"}]}
    r = api.post("/v1/trigger/lineup", json=body)
    assert r.status_code == 422
    assert r.json()["field"] == "swaps[0].player_id"
    waiver = api.post("/v1/trigger/waiver", json={**TEAM, "add_player_id": "4034"})
    assert waiver.status_code == 422 and waiver.json()["field"] == "add_player_id"
    assert read_queue("lineup_updates") == [] and read_queue("waiver_actions") == []


def test_missing_and_mistyped_fields_are_422_naming_the_field(api):
    r = api.post("/v1/trigger/lineup", json={"league_id": "L1", "swaps": []})
    assert r.status_code == 422 and r.json()["field"] == "team_id"
    r = api.post("/v1/trigger/draft-pick", json=draft(pick_number="twelve"))
    assert r.status_code == 422 and r.json()["field"] == "pick_number"


def test_waiver_and_draft_pick_are_accepted(api, read_queue):
    waiver = {
        **TEAM,
        "add_player_id": 4241457,
        "drop_player_id": 3918298,
        "bid": 5,
    }
    assert api.post("/v1/trigger/waiver", json=waiver).status_code == 202
    expires = (utcnow() + timedelta(minutes=5)).isoformat()
    assert api.post("/v1/trigger/draft-pick", json=draft(expires_at=expires)).status_code == 202
    assert len(read_queue("waiver_actions")) == 1 and len(read_queue("draft_targets")) == 1


def test_a_filled_pick_is_409(api):
    first = api.post("/v1/trigger/draft-pick", json=draft())
    record_result(first.json()["tracking_id"], ActionStatus.SUCCEEDED)
    r = api.post("/v1/trigger/draft-pick", json=draft(espn_id=3918298))
    assert r.status_code == 409 and "filled" in r.json()["error"]


def test_a_same_key_repeat_of_the_pick_that_filled_it_is_200_duplicate_with_the_original_id(api):
    """The key lookup comes before the filled check: the repeat is answered by its key, not 409."""
    keyed = draft(idempotency_key="L1:12:4241457")  # publisher.idempotency.draft_key
    first = api.post("/v1/trigger/draft-pick", json=keyed)
    record_result(first.json()["tracking_id"], ActionStatus.SUCCEEDED)
    again = api.post("/v1/trigger/draft-pick", json=keyed)
    assert again.status_code == 200, again.text
    assert again.json()["status"] == "duplicate"
    assert again.json()["tracking_id"] == first.json()["tracking_id"]


def test_an_expired_pick_is_409(api):
    r = api.post(
        "/v1/trigger/draft-pick", json=draft(expires_at=(utcnow() - timedelta(seconds=1)).isoformat())
    )
    assert r.status_code == 409 and "expired" in r.json()["error"]


def test_an_unreadable_parent_is_503_and_queues_nothing(api, settings, read_queue):
    ir = {**LINEUP, "swaps": [{"player_id": 3918298, "to_slot": "IR", "kind": "ir"}]}
    parent = api.post("/v1/trigger/lineup", json=ir).json()["tracking_id"]
    read_queue("lineup_updates")
    locker = psycopg2.connect(settings.database_url)
    try:
        with locker.cursor() as cur:
            cur.execute("SELECT 1 FROM activity_actions WHERE tracking_id = %s FOR UPDATE", (parent,))
        claim = {**TEAM, "add_player_id": 4241457, "after_tracking_id": parent}
        r = api.post("/v1/trigger/waiver", json=claim)
    finally:
        locker.rollback()
        locker.close()
    assert r.status_code == 503, r.text
    assert r.json()["retryable"] is True
    assert read_queue("waiver_actions") == []


def test_an_undelivered_draft_pick_is_503_with_its_tracking_id(broken_server, keys, db):
    r = httpx.post(
        f"{broken_server.url}/v1/trigger/draft-pick",
        json=draft(),
        headers=bearer(keys["trigger"]),
        timeout=60,
    )
    assert r.status_code == 503, r.text
    # The answer names the setting, never the address (that is in the server's log).
    assert "AMQP_URL" in r.json()["error"] and "://" not in r.text and "127.0.0.1" not in r.text
    tracking_id = r.json()["tracking_id"]
    assert get_action(tracking_id).status == ActionStatus.QUEUED.value
    again = httpx.post(
        f"{broken_server.url}/v1/trigger/draft-pick",
        json={**draft(), "idempotency_key": "d-1"},
        headers=bearer(keys["trigger"]),
        timeout=60,
    )
    assert again.status_code == 503


def test_rumor_action_sends_its_moves(api, read_queue):
    body = {
        **TEAM,
        "season": 2026,
        "week": 3,
        "roster": {"3918298": "RB"},
        "signals": [{"player_id": 3918298, "kind": "ruled_out", "confidence": 0.9}],
    }
    r = api.post("/v1/trigger/rumor-action", json=body)
    assert r.status_code == 202, r.text
    (outcome,) = r.json()["outcomes"]
    assert outcome["results"][0]["status"] in NEW
    again = api.post("/v1/trigger/rumor-action", json=body)
    assert again.status_code == 200
    assert again.json()["outcomes"][0]["results"][0]["status"] == "duplicate"
    assert len(read_queue("lineup_updates")) == 1


def test_concurrent_repeats_of_one_key_make_one_action(api):
    body = {**LINEUP, "idempotency_key": "same"}
    answers: list[httpx.Response] = []

    def send() -> None:
        answers.append(api.post("/v1/trigger/lineup", json=body))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.status_code for a in answers) == [200] * 7 + [202]
    assert len({a.json()["tracking_id"] for a in answers}) == 1


def test_a_trigger_while_rabbitmq_is_down_is_saved_and_accepted(broken_server, keys, db):
    r = httpx.post(
        f"{broken_server.url}/v1/trigger/lineup", json=LINEUP, headers=bearer(keys["trigger"]), timeout=60
    )
    assert r.status_code == 202, r.text
    assert r.json()["status"] in NEW
    assert get_action(r.json()["tracking_id"]).status == ActionStatus.QUEUED.value
