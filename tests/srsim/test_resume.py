"""srsim's resume ids: replay from a message inclusive, the refusals (410), a feed without resume."""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import parse_qs, urlsplit

import requests

from srsim.script import GameScript
from tests.waiting import wait_for


def _game(**kw) -> GameScript:
    values = {"sr_id": str(uuid.uuid4()), "league": "mlb", "start_after": 0.05, "event_interval": 0.02}
    values.update(kw)
    return GameScript(**values)


def _url(srv, game: GameScript, *, ndjson: bool = True, resume_id: str | None = None) -> str:
    url = f"{srv.base_url}/mlb/trial/stream/en/events/subscribe?match=sd:match:{game.sr_id}"
    if ndjson:
        url += "&format=ndjson"
    if resume_id is not None:
        url += f"&resume_id={resume_id}"
    return url


def _events(url: str, n: int, headers: dict[str, str] | None = None) -> list[dict]:
    """The first ``n`` event messages of an ndjson stream (heartbeats skipped)."""
    out = []
    with requests.get(url, stream=True, timeout=5, headers=headers) as resp:
        assert resp.status_code == 200, resp.text
        for line in resp.iter_lines():
            message = json.loads(line) if line else {}
            if "payload" in message:
                out.append(message)
            if len(out) >= n:
                break
    return out


def _sse_frames(url: str, n: int, headers: dict[str, str] | None = None) -> list[tuple[str | None, dict]]:
    """The first ``n`` SSE event frames as (id line, data)."""
    frames: list[tuple[str | None, dict]] = []
    with requests.get(url, stream=True, timeout=5, headers=headers) as resp:
        assert resp.status_code == 200, resp.text
        kind, event_id = None, None
        for raw in resp.iter_lines():
            line = raw.decode()
            if line.startswith("event: "):
                kind, event_id = line[7:], None
            elif line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: ") and kind == "event":
                frames.append((event_id, json.loads(line[6:])))
                if len(frames) >= n:
                    break
    return frames


def _index(message: dict) -> int:
    return int(message["resume_id"].rsplit(".", 1)[1])


def test_every_event_carries_a_resume_id_of_this_instance_and_heartbeats_none(server):
    game = _game(event_count=200)
    srv = server([game])
    with requests.get(_url(srv, game), stream=True, timeout=5) as resp:
        messages = []
        for line in resp.iter_lines():
            if line:
                messages.append(json.loads(line))
            if sum("payload" in m for m in messages) >= 5 and any("heartbeat" in m for m in messages):
                break
    events = [m for m in messages if "payload" in m]
    assert all(m["resume_id"].startswith(f"{srv.token}.") for m in events)
    assert [_index(m) for m in events] == list(range(_index(events[0]), _index(events[0]) + 5))
    assert all("resume_id" not in m for m in messages if "heartbeat" in m)
    session = srv.sessions[game.sr_id]
    assert json.loads(session.lines[_index(events[0])]) == events[0]
    # SSE: the same id on the id: line.
    frames = _sse_frames(_url(srv, game, ndjson=False), 3)
    assert all(event_id == data["resume_id"] for event_id, data in frames)


def test_a_resume_inside_the_window_replays_from_that_message_inclusive_then_goes_on_live(server):
    game = _game(event_count=400)
    srv = server([game])
    session = srv.sessions[game.sr_id]
    first = _events(_url(srv, game), 3)
    resume_id = first[1]["resume_id"]
    start = _index(first[1])
    wait_for(lambda: session.position() >= start + 10, what="ten more messages sent")
    live = session.position()
    replay = _events(_url(srv, game, resume_id=resume_id), live - start + 5)
    # Messages sent before the reconnect are marked as replayed; the live ones after are not.
    flags = [m.pop("replay", False) for m in replay]
    assert flags[0] and not flags[-1]
    assert flags == sorted(flags, reverse=True)
    assert replay[0] == first[1]  # the given message itself, again
    assert [_index(m) for m in replay] == list(range(start, start + len(replay)))
    assert _index(replay[-1]) > live  # past the live position at reconnect: live again
    assert [json.loads(line) for line in session.lines[start : start + len(replay)]] == replay


def test_sse_resumes_from_the_last_event_id_header_and_from_the_parameter(server):
    game = _game(event_count=400)
    srv = server([game])
    [(_, first)] = _sse_frames(_url(srv, game, ndjson=False), 1)
    rid = first["resume_id"]
    wait_for(lambda: srv.sessions[game.sr_id].position() > _index(first) + 5, what="more messages sent")
    by_header = _sse_frames(_url(srv, game, ndjson=False), 2, headers={"Last-Event-ID": rid})
    assert by_header[0][1]["resume_id"] == rid
    by_param = _sse_frames(_url(srv, game, ndjson=False, resume_id=rid), 2)
    assert by_param[0][1].pop("replay") is True
    assert by_param[0][1] == first


def test_the_ndjson_redirect_keeps_the_resume_id(server):
    game = _game(event_count=400)
    srv = server([game])
    first = _events(_url(srv, game), 1)[0]
    rid = first["resume_id"]
    hop = requests.get(_url(srv, game, resume_id=rid), allow_redirects=False, timeout=5)
    assert hop.status_code == 302
    location = urlsplit(hop.headers["Location"])
    assert location.path == f"/_push/{game.sr_id}"
    assert parse_qs(location.query) == {"resume_id": [rid]}
    assert _events(_url(srv, game, resume_id=rid), 1) == [{**first, "replay": True}]


def _refusal(url: str, **kw) -> str:
    resp = requests.get(url, timeout=5, **kw)
    assert resp.status_code == 410, resp.text
    return resp.json()["message"]


def test_a_resume_is_refused_with_410_once_its_window_passed(server):
    game = _game(event_count=400)
    srv = server([game], resume_window_seconds=0.3)
    session = srv.sessions[game.sr_id]
    wait_for(lambda: session.elapsed() - session.times[0] > 0.5, what="message 0 older than the window")
    message = _refusal(_url(srv, game, resume_id=f"{srv.token}.0"))
    assert "window" in message
    assert "window" in _refusal(_url(srv, game, ndjson=False), headers={"Last-Event-ID": f"{srv.token}.0"})
    assert srv.connections(game.sr_id) == 0


def test_an_id_of_another_instance_a_malformed_or_unsent_one_is_refused_with_410(server):
    game = _game(event_count=400)
    srv, other = server([game]), server([game])
    rid = _events(_url(other, game), 1)[0]["resume_id"]
    assert other.token != srv.token
    assert "instance" in _refusal(_url(srv, game, resume_id=rid))
    assert "malformed" in _refusal(_url(srv, game, resume_id="nope"))
    assert "malformed" in _refusal(_url(srv, game, resume_id=f"{srv.token}.x"))
    assert "not been sent" in _refusal(_url(srv, game, resume_id=f"{srv.token}.399"))


def test_more_missed_messages_than_the_maximum_is_refused_with_410(server):
    game = _game(event_count=400, event_interval=0.04)
    srv = server([game], resume_max_messages=10)
    session = srv.sessions[game.sr_id]
    wait_for(lambda: session.position() >= 20, what="twenty messages sent")
    assert "too many" in _refusal(_url(srv, game, resume_id=f"{srv.token}.0"))
    live = session.position()
    assert _events(_url(srv, game, resume_id=f"{srv.token}.{live - 1}"), 1)[0]["resume_id"]  # 0 missed


def test_a_server_without_resume_sends_no_resume_ids_and_ignores_the_parameter(server):
    game = _game(event_count=400)
    srv = server([game], resume=False)
    session = srv.sessions[game.sr_id]
    wait_for(lambda: session.position() >= 10, what="ten messages sent")
    before = session.position()
    events = _events(_url(srv, game, resume_id=f"{srv.token}.0"), 3)
    assert all("resume_id" not in m for m in events)
    assert events[0]["payload"]["event"]["sequence_number"] >= before - 1  # live, no replay
    frames = _sse_frames(_url(srv, game, ndjson=False, resume_id="garbage"), 3)
    assert all(event_id is not None and event_id.isdigit() for event_id, _ in frames)  # bare indexes
    assert all("resume_id" not in data for _, data in frames)
    assert all(b"resume_id" not in line for line in session.lines)


def test_stamped_sends_say_when_each_event_frame_was_written(server):
    game = _game(event_count=400)
    plain = server([game])
    assert all("srsim_sent_at" not in m for m in _events(_url(plain, game), 3))  # off by default
    stamped = server([game], stamp_sends=True)
    before = time.time()
    events = _events(_url(stamped, game), 3)
    after = time.time()
    stamps = [m["srsim_sent_at"] for m in events]
    assert all(isinstance(t, float) and before <= t <= after for t in stamps), (before, stamps, after)
    assert stamps == sorted(stamps)
    # the frame is the script's line plus the stamp
    session = stamped.sessions[game.sr_id]
    line = json.loads(session.lines[_index(events[0])])
    assert {k: v for k, v in events[0].items() if k != "srsim_sent_at"} == line
    # a replay is stamped too, after its replay mark
    resumed = _events(_url(stamped, game, resume_id=events[0]["resume_id"]), 1)[0]
    assert resumed["replay"] is True and resumed["srsim_sent_at"] >= stamps[-1]
