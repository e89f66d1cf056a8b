"""srsim's record of live data per stream connection (``first_live``, ``last_live``): a live event
or a heartbeat handed to the connection counts, a replayed event does not."""

from __future__ import annotations

import json
import uuid

import requests

from srsim.script import GameScript
from tests.waiting import wait_for


def _game(**kw) -> GameScript:
    values = {"sr_id": str(uuid.uuid4()), "league": "mlb", "start_after": 0.05, "event_interval": 0.02}
    values.update(kw)
    return GameScript(**values)


def _url(srv, game: GameScript, resume_id: str | None = None) -> str:
    url = f"{srv.base_url}/mlb/trial/stream/en/events/subscribe?match=sd:match:{game.sr_id}&format=ndjson"
    return url + (f"&resume_id={resume_id}" if resume_id else "")


def _connections(srv) -> list[dict]:
    return requests.get(f"{srv.base_url}/_srsim/connections", timeout=5).json()["connections"]


def test_a_stream_records_when_live_data_was_first_and_last_sent_on_it(server):
    game = _game(event_count=2000)
    srv = server([game], heartbeat_seconds=30)
    with requests.get(_url(srv, game), stream=True, timeout=10) as resp:
        lines = resp.iter_lines()
        received = [json.loads(next(lines)) for _ in range(5)]
        assert all("payload" in m and "replay" not in m for m in received)
        [open_one] = _connections(srv)
        assert open_one["opened"] <= open_one["first_live"] <= open_one["last_live"]
        assert open_one["closed"] is None
    wait_for(lambda: _connections(srv)[0]["closed"] is not None, what="the close recorded")
    [closed] = _connections(srv)
    assert closed["first_live"] <= closed["last_live"] <= closed["closed"]


def test_a_heartbeat_is_live_data(server):
    game = _game(event_count=10, start_after=60)  # no event for a minute: heartbeats only
    srv = server([game], heartbeat_seconds=0.1)
    with requests.get(_url(srv, game), stream=True, timeout=10) as resp:
        assert json.loads(next(resp.iter_lines())) == {"heartbeat": {"interval": 100}}
        wait_for(lambda: _connections(srv)[0]["first_live"] is not None, what="the heartbeat recorded")


def test_replayed_events_are_not_live_data(server):
    # the first stream connects within the 2 s before the first event (or it would get none); every
    # event is sent long before the resume
    game = _game(event_count=5, event_interval=0.01, start_after=2)
    srv = server([game], heartbeat_seconds=30)
    with requests.get(_url(srv, game), stream=True, timeout=10) as first:
        resume_id = next(m for m in map(json.loads, first.iter_lines()) if "payload" in m)["resume_id"]
    wait_for(lambda: srv.sessions[game.sr_id].position() >= 5, what="the whole game sent")
    # the resume starts at the message it names: the first one the first stream got, which is not
    # message 0 when that stream connected after the game began (a loaded machine)
    first_index = int(resume_id.rpartition(".")[2])
    with requests.get(_url(srv, game, resume_id), stream=True, timeout=10) as resp:
        lines = resp.iter_lines()
        replayed = [json.loads(next(lines)) for _ in range(5 - first_index)]
        assert all(m.get("replay") is True for m in replayed)
        second = _connections(srv)[1]
        assert second["opened"] is not None and second["first_live"] is None and second["last_live"] is None
