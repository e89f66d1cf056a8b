"""Bad text: a lone surrogate (``"\\ud800"``) is refused at validation like NUL, 422 naming the field."""

from __future__ import annotations

import json

import pytest

from tests.api.test_trades_actions_runs import OFFER
from tests.api.test_triggers import LINEUP, TEAM, draft

LONE = "a\ud800b"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/trigger/lineup", {**LINEUP, "league_id": LONE}, "league_id"),
        ("/v1/trigger/lineup", {**LINEUP, "team_id": LONE}, "team"),
        ("/v1/trigger/lineup", {**LINEUP, "idempotency_key": LONE}, "idempotency_key"),
        ("/v1/trigger/lineup", {**LINEUP, "decision_inputs": {"why": LONE}}, "decision_inputs"),
        ("/v1/trigger/lineup", {**LINEUP, "decision_inputs": {LONE: 1}}, "decision_inputs"),
        ("/v1/trigger/lineup", {**LINEUP, "swaps": [{"player_id": 3918298, "to_slot": LONE}]}, "swaps"),
        ("/v1/trigger/waiver", {**TEAM, "add_player_id": 42, "idempotency_key": LONE}, "idempotency_key"),
        ("/v1/trigger/draft-pick", draft(league_id=LONE), "league_id"),
        ("/v1/trade/offers/offer-s/approve", {**OFFER, "league_id": LONE}, "league_id"),
        ("/v1/runs", {"job": "scoped", "params": {"steps": [LONE]}}, "params"),
    ],
)
def test_a_lone_surrogate_is_422_naming_the_field(api, path, body, field):
    # json.dumps writes the lone surrogate as the escape "\ud800" (valid JSON text, not UTF-8).
    answer = api.post(path, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"].startswith(field), answer.text
    assert "lone surrogate" in answer.json()["error"], answer.text


def test_nul_is_still_refused_the_same_way(api):
    answer = api.post("/v1/trigger/lineup", json={**LINEUP, "league_id": "a\x00b"})
    assert answer.status_code == 422 and answer.json()["field"] == "league_id"
    answer = api.post("/v1/runs", json={"job": "scoped", "params": {"steps": ["a\x00b"]}})
    assert answer.status_code == 422 and answer.json()["field"] == "params"
    assert "NUL" in answer.json()["error"]


@pytest.mark.parametrize("bad", [LONE, "a\x00b"])
def test_a_start_override_that_cannot_be_stored_is_422_naming_the_setting(api, make_match, bad):
    match = make_match(status="inprogress")
    body = {"force": True, "reason": "drill", "overrides": {"listener_sr_env": bad}}
    answer = api.post(
        f"/v1/matches/{match.id}/start-listener",
        content=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 422, answer.text
    assert "listener_sr_env" in answer.json()["error"]
