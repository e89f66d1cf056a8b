"""srsim: continuous sessions, both framings, the schedule API, is_test status ownership, scripts."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import pytest
import requests

from models import Match
from srsim.errors import SimulatorScriptError
from srsim.script import GameScript, load_script
from srsim.status import StatusWriter
from tests.waiting import wait_for


def _game(**kw) -> GameScript:
    values = {"sr_id": str(uuid.uuid4()), "league": "mlb", "start_after": 0.1, "event_interval": 0.05}
    values.update(kw)
    return GameScript(**values)


def _read_ndjson(url: str, n: int) -> list[dict]:
    out = []
    with requests.get(url, stream=True, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        for line in resp.iter_lines():
            if line:
                out.append(json.loads(line))
            if len(out) >= n:
                break
    return out


def test_a_sessions_clock_runs_without_listeners_so_a_late_listener_gets_the_live_position(server):
    game = _game(event_count=100)
    srv = server([game])
    started = time.monotonic()  # the session's clock runs since before this
    time.sleep(1.1)  # about 20 events happen with nobody listening (more if this sleeps longer)
    url = f"{srv.base_url}/mlb/trial/stream/en/events/subscribe?match=sd:match:{game.sr_id}&format=ndjson"
    messages = [m for m in _read_ndjson(url, 8) if "payload" in m]
    live_at_most = (time.monotonic() - started - game.start_after) / game.event_interval + 2
    first = messages[0]["payload"]["event"]["sequence_number"]
    assert 12 <= first <= live_at_most  # neither from the start nor ahead of the live position


def test_the_ndjson_stream_is_behind_a_redirect_and_interleaves_heartbeats(server):
    game = _game(event_count=5, event_interval=0.2)
    srv = server([game])
    url = f"{srv.base_url}/mlb/trial/stream/en/events/subscribe?match=sd:match:{game.sr_id}&format=ndjson"
    first = requests.get(url, allow_redirects=False, timeout=5)
    assert first.status_code == 302 and first.headers["Location"].startswith("/_push/")
    messages = _read_ndjson(url, 12)
    assert {"heartbeat": {"interval": 50}} in messages
    event = next(m for m in messages if "payload" in m)
    assert set(event) == {"payload", "locale", "metadata", "resume_id"}
    assert set(event["payload"]) == {"game", "event"}
    assert event["metadata"]["match"] == f"sd:match:{game.sr_id}"
    assert event["metadata"]["operation"] in {"create", "update"}


def test_sse_is_the_default_framing(server):
    game = _game(event_count=3)
    srv = server([game])
    url = f"{srv.base_url}/mlb/trial/stream/en/events/subscribe?match=sd:match:{game.sr_id}"
    with requests.get(url, stream=True, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        chunk = next(resp.iter_content(4096))
    assert chunk.startswith(b"event: ")


def test_an_unknown_match_is_404_and_a_wrong_key_is_401(server):
    srv = server([_game()], api_key="secret")
    url = f"{srv.base_url}/mlb/trial/stream/en/events/subscribe?match=sd:match:nope"
    assert requests.get(url, headers={"x-api-key": "secret"}, timeout=5).status_code == 404
    assert requests.get(url, headers={"x-api-key": "wrong"}, timeout=5).status_code == 401


def test_the_schedule_api_answers_daily_weekly_and_season_shapes(server):
    nfl = _game(league="nfl", week=2)
    srv = server([_game(), nfl])
    today = datetime.now(UTC)
    daily = requests.get(f"{srv.base_url}/mlb/trial/games/{today:%Y/%m/%d}/schedule.json", timeout=5).json()
    assert daily["date"] == today.date().isoformat() and len(daily["games"]) == 1
    game = daily["games"][0]
    assert {"id", "status", "scheduled", "home", "away"} <= set(game)
    weekly = requests.get(f"{srv.base_url}/nfl/trial/games/2024/REG/2/schedule.json", timeout=5).json()
    assert [g["id"] for g in weekly["week"]["games"]] == [nfl.sr_id]
    season = requests.get(f"{srv.base_url}/nfl/trial/games/2024/REG/schedule.json", timeout=5).json()
    assert season["weeks"][0]["games"][0]["id"] == nfl.sr_id


def test_srsim_moves_an_is_test_matchs_status_through_the_game(server, make_match):
    game = _game(event_count=10, game_delay_at_event=4, delay_seconds=0.8)
    match = make_match("mlb", sr_id=game.sr_id, is_test=True)
    live = make_match("mlb", sr_id=str(uuid.uuid4()), is_test=False)
    writer = StatusWriter()
    try:
        server([game, _game(sr_id=live.sr_id, is_test=False)], status_writer=writer)
        seen = []

        def closed() -> bool:
            status = Match.get_by_id(match.id).status
            if not seen or seen[-1] != status:
                seen.append(status)
            return status == "closed"

        wait_for(closed, timeout=10, interval=0.01, what="the is_test match closed")
    finally:
        writer.close()
    assert seen == ["scheduled", "inprogress", "delayed", "inprogress", "closed"]
    assert Match.get_by_id(live.id).status == "scheduled"  # live matches are not srsim's


def test_a_script_file_is_loaded_and_a_broken_one_is_one_clear_error(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"games": [{"sr_id": "g1", "league": "NHL", "game_delay_at_event": "3"}]}))
    [game] = load_script(path)
    assert game.league == "nhl" and game.game_delay_at_event == 3
    path.write_text("{nope")
    with pytest.raises(SimulatorScriptError):
        load_script(path)
    path.write_text(json.dumps({"games": [{"league": "nhl"}]}))
    with pytest.raises(SimulatorScriptError):
        load_script(path)
