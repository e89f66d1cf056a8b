"""POST /v1/trigger/rumor-action with a bad second signal: 422 naming it, and no move saved or sent."""

from __future__ import annotations

from models.db import database
from tests.api.test_triggers import TEAM


def test_rumor_action_with_a_bad_second_signal_answers_422_and_sends_nothing(api, read_queue):
    database.execute_sql("INSERT INTO players (sleeper_id, synced_at) VALUES ('4046', now())")
    body = {
        **TEAM,
        "season": 2026,
        "week": 3,
        "roster": {"3918298": "RB", "4362628": "WR"},
        "signals": [
            {"player_id": 3918298, "kind": "ruled_out", "confidence": 0.9},
            {"player_id": 4362628, "kind": "season_ending", "confidence": 0.8, "replacement_player_id": 4046},
        ],
    }
    r = api.post("/v1/trigger/rumor-action", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "signals[1].replacement_player_id"
    assert database.execute_sql("SELECT count(*) FROM activity_actions").fetchone()[0] == 0
    assert read_queue("lineup_updates") == []
