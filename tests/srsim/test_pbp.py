"""srsim's play-by-play route and its faults, dropped streams, and srsim.pbp.final_events."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
import requests

from srsim.pbp import final_events
from srsim.script import GameScript
from tests.waiting import wait_for


def _game(**kw) -> GameScript:
    values = {"sr_id": str(uuid.uuid4()), "league": "mlb", "start_after": 0.05, "event_interval": 0.01}
    values.update(kw)
    return GameScript(**values)


def _pbp(srv, game: GameScript, *, prefix: str = "/mlb/trial", **kw) -> requests.Response:
    return requests.get(f"{srv.base_url}{prefix}/games/{game.sr_id}/pbp.json", timeout=5, **kw)


def _msg(event: dict | None, *, op: str = "create", category: str | None = "pitch") -> dict:
    meta = {"operation": op} | ({"event_category": category} if category else {})
    return {"payload": {"game": {"id": "g"}, "event": event}, "metadata": meta}


@pytest.mark.unit
def test_final_events_keep_each_id_once_in_its_last_version_at_its_first_place():
    messages = [
        _msg({"id": "a", "v": 1}, category="atbat"),
        _msg({"id": "b", "v": 1}),
        {"heartbeat": {"interval": 5000}},
        {"kickoff": {"marker": "delay"}},
        _msg({"id": "a", "v": 2}, op="update", category="atbat,corrected"),
        _msg({"id": "c", "v": 1, "event_category": "own"}),
        _msg({"id": "b", "type": "pitch", "deleted": "2026-01-01T00:00:00+00:00"}, op="delete"),
        _msg({"v": "no id"}, category=None),
        _msg({"id": "b", "v": 3}),  # after its delete: new, at the end
    ]
    assert final_events(messages) == [
        {"id": "a", "v": 2, "event_category": "atbat,corrected"},
        {"id": "c", "v": 1, "event_category": "own"},  # the event's own category is kept
        {"v": "no id"},
        {"id": "b", "v": 3, "event_category": "pitch"},
    ]
    assert messages[0]["payload"]["event"] == {"id": "a", "v": 1}  # the input is not changed
    assert final_events([]) == []


@pytest.mark.unit
def test_final_events_skip_messages_without_an_event_and_deletes_of_unknown_ids():
    messages = [_msg(None), {"payload": "x"}, _msg({"id": "z"}, op="delete"), "not a dict"]
    assert final_events(messages) == []  # type: ignore[arg-type]


def test_the_pbp_answers_final_versions_in_order_with_deletes_left_out(server):
    game = _game(event_count=24, corrections=2, deletes=1)
    srv = server([game])
    session = srv.sessions[game.sr_id]
    assert session.describe()["events"] == len(session.lines) == game.total_events == game.event_count + 3
    wait_for(  # the game closes after its last message is sent (later still on a loaded box)
        lambda: session.position() == len(session.lines) and session.status() == "closed",
        what="every message sent and the game closed",
    )
    body = _pbp(srv, game).json()
    messages = [json.loads(line) for line in session.lines]
    deleted = {m["payload"]["event"]["id"] for m in messages if m["metadata"]["operation"] == "delete"}
    corrected = {m["payload"]["event"]["id"] for m in messages if "description" in m["payload"]["event"]}
    assert len(deleted) == 1 and len(corrected) == 2
    first_seen = list(dict.fromkeys(m["payload"]["event"]["id"] for m in messages))
    assert [e["id"] for e in body["events"]] == [i for i in first_seen if i not in deleted]
    assert len(body["events"]) == game.event_count - 1
    by_id = {e["id"]: e for e in body["events"]}
    for event_id in corrected:
        assert by_id[event_id]["event_category"] == "pitch,ball"
        assert by_id[event_id]["updated_at"] > by_id[event_id]["created_at"]
    assert all("event_category" in e for e in body["events"])
    assert body["events"] == final_events(messages)
    assert body["game"]["id"] == game.sr_id and body["game"]["status"] == "closed"
    assert {"scheduled", "home", "away"} <= set(body["game"])
    versioned = _pbp(srv, game, prefix="/mlb/trial/v7/en").json()
    assert versioned["events"] == body["events"]
    assert srv.pbp_requests[game.sr_id] == 2


def test_the_pbp_holds_only_the_events_sent_so_far(server):
    game = _game(event_count=400, event_interval=0.05)
    later = _game(event_count=4, start_after=60)
    srv = server([game, later])
    session = srv.sessions[game.sr_id]
    wait_for(lambda: session.position() >= 3, what="three messages sent")
    before = session.position()
    events = _pbp(srv, game).json()["events"]
    after = session.position()
    assert before <= len(events) <= after
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    body = _pbp(srv, later).json()
    assert body["events"] == [] and body["game"]["status"] == "scheduled"


def test_the_pbp_is_404_for_an_unknown_match_or_another_league_and_401_without_the_key(server):
    game = _game()
    srv = server([game], api_key="secret")
    key = {"x-api-key": "secret"}
    assert _pbp(srv, game, headers=key).status_code == 200
    assert _pbp(srv, game, prefix="/nhl/trial", headers=key).status_code == 404
    assert _pbp(srv, _game(), headers=key).status_code == 404
    assert _pbp(srv, game, headers={"x-api-key": "wrong"}).status_code == 401
    assert srv.pbp_requests[game.sr_id] == 1


def test_each_pbp_fault_is_consumed_by_one_request(server):
    game = _game(event_count=8)
    srv = server([game])
    session = srv.sessions[game.sr_id]
    wait_for(lambda: session.position() == len(session.lines), what="every message sent")
    srv.pbp_faults.extend(["503", "404", "notjson", "noids"])
    assert _pbp(srv, game).status_code == 503
    assert _pbp(srv, game).status_code == 404
    notjson = _pbp(srv, game)
    assert notjson.status_code == 200
    with pytest.raises(ValueError):
        notjson.json()
    noids = _pbp(srv, game)
    assert noids.status_code == 200
    assert len(noids.json()["events"]) == 8 and all("id" not in e for e in noids.json()["events"])
    normal = _pbp(srv, game).json()
    assert len(normal["events"]) == 8 and all("id" in e for e in normal["events"])
    assert srv.pbp_faults == [] and srv.pbp_requests[game.sr_id] == 5


def _open_stream(srv, game: GameScript, outcome: list[str]) -> threading.Thread:
    """Read the match's ndjson stream in a thread; ``outcome`` gets how it ended."""

    def read() -> None:
        url = f"{srv.base_url}/mlb/trial/stream/en/events/subscribe?match=sd:match:{game.sr_id}&format=ndjson"
        try:
            with requests.get(url, stream=True, timeout=10) as resp:
                for _ in resp.iter_lines():
                    pass
            outcome.append("ended")
        except requests.RequestException as exc:
            outcome.append(type(exc).__name__)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_drop_streams_cuts_the_connections_of_one_match_abruptly_and_connections_counts(server):
    a, b = _game(event_count=400, event_interval=0.05), _game(event_count=400, event_interval=0.05)
    srv = server([a, b])
    outcomes: list[str] = []
    threads = [_open_stream(srv, a, outcomes), _open_stream(srv, a, outcomes)]
    other: list[str] = []
    threads.append(_open_stream(srv, b, other))
    wait_for(lambda: srv.connections(a.sr_id) == 2 and srv.connections(b.sr_id) == 1, what="3 streams")
    assert srv.streams_open == 3

    assert srv.drop_streams(a.sr_id) == 2
    assert srv.connections(a.sr_id) == 0 and srv.connections(b.sr_id) == 1
    wait_for(lambda: len(outcomes) == 2, what="both clients saw the cut")
    assert outcomes == ["ChunkedEncodingError", "ChunkedEncodingError"]  # no final chunk
    assert other == []

    threads.append(_open_stream(srv, a, outcomes))  # a reconnect is served again
    wait_for(lambda: srv.connections(a.sr_id) == 1, what="the reconnect")
    assert srv.drop_streams() == 2
    assert srv.streams_open == 0
    wait_for(lambda: len(outcomes) == 3 and len(other) == 1, what="every client saw the cut")
    assert srv.pbp_requests[a.sr_id] == 0


def test_a_client_closing_its_stream_stops_counting_at_once(server):
    game = _game(event_count=10, start_after=60)  # heartbeats only
    srv = server([game], heartbeat_seconds=30)  # no write would notice the close for 30 s
    url = f"{srv.base_url}/mlb/trial/stream/en/events/subscribe?match=sd:match:{game.sr_id}"
    resp = requests.get(url, stream=True, timeout=5)
    wait_for(lambda: srv.connections(game.sr_id) == 1, what="the stream counted")
    resp.close()
    wait_for(lambda: srv.connections(game.sr_id) == 0, timeout=5, what="the closed stream uncounted")


def test_a_cut_reaches_a_stream_waiting_for_its_next_frame_at_once(server):
    game = _game(event_count=10, start_after=60)  # heartbeats only
    srv = server([game], heartbeat_seconds=30)  # the stream waits 30 s for its next frame
    outcomes: list[str] = []
    _open_stream(srv, game, outcomes)
    wait_for(lambda: srv.connections(game.sr_id) == 1, what="the stream counted")
    assert srv.drop_streams(game.sr_id) == 1
    # the wait ends with the cut, not at the next heartbeat (nor at the client's 10 s read timeout)
    wait_for(lambda: outcomes, timeout=5, what="the client saw the cut")
    assert outcomes == ["ChunkedEncodingError"]  # no final chunk


def test_the_connection_log_names_who_connected_through_a_via_prefix_and_when_each_stream_closed(server):
    game = _game(event_count=400, event_interval=0.05)
    srv = server([game])
    url = f"{srv.base_url}/_via/h1w0g2/mlb/trial/stream/en/events/subscribe?match=sd:match:{game.sr_id}"
    with requests.get(url, stream=True, timeout=10) as resp:
        assert resp.status_code == 200
        lines = resp.iter_lines()  # kept: a dropped generator closes the response
        next(lines)
        [logged] = requests.get(f"{srv.base_url}/_srsim/connections", timeout=5).json()["connections"]
        assert logged["sr_id"] == game.sr_id and logged["via"] == "h1w0g2" and logged["closed"] is None
    wait_for(lambda: srv.stream_history[0].closed is not None, what="the close logged")
    assert srv.stream_history[0].closed >= srv.stream_history[0].opened
    plain = requests.get(f"{srv.base_url}/_via/x/mlb/trial/games/{game.sr_id}/pbp.json", timeout=5)
    assert plain.status_code == 200  # any route takes the prefix
