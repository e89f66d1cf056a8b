"""srsim's HTTP routes: a Starlette app over one simulator's sessions (routes: srsim.server).

Every answer carries ``Connection: close``, like the provider's edge; errors are JSON
``{"message": ...}``. Paths take an optional ``/_via/{tag}`` prefix (recorded as a stream's
``via``). Only GET is served (405 otherwise); with an API key every route but ``/_srsim/*``
needs it (401).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from config import feed_json
from models.leagues import PLAYERS
from srsim import leagues
from srsim.errors import SimulatorScriptError
from srsim.pbp import final_events
from srsim.push import PushStream

if TYPE_CHECKING:
    from srsim.sessions import Session, Simulator

logger = logging.getLogger(__name__)

#: The fault kinds of ``SimServer.pbp_faults``.
PBP_FAULTS = ("503", "404", "notjson", "noids")
_CLOSE = {"Connection": "close"}
_VIA = re.compile(r"^/_via/[A-Za-z0-9_.-]{1,64}(?=/)")
_OPEN_PATHS = ("/_srsim/sessions", "/_srsim/connections")  # served without the API key


def _convertor(name: str, pattern: str) -> str:
    """Register a path convertor matching ``pattern`` as ``srsim_{name}``; returns its key."""

    class Matching(Convertor[str]):
        regex = pattern

        def convert(self, value: str) -> str:
            return value

        def to_string(self, value: str) -> str:
            return value

    key = f"srsim_{name}"
    register_url_convertor(key, Matching())
    return key


_SLUG = _convertor("slug", "[a-z0-9_-]+")
_LANG = _convertor("lang", "[a-z]+")
_LANG2 = _convertor("lang2", "[a-z]{2}")
_VERSION = _convertor("version", r"v\d+")
_SR_ID = _convertor("sr_id", "[A-Za-z0-9_.:-]+")
_YEAR = _convertor("year", r"\d{4}")
_TWO = _convertor("two_digits", r"\d{2}")
_SEASON = _convertor("season", "[A-Z]{3}")
_NUMBER = _convertor("number", r"\d+")
_TAG = _convertor("via", "[A-Za-z0-9_.-]{1,64}")
_LEAGUE_DOC = _convertor("league_doc", "hierarchy|teams|seasons")


def json_response(status: int, body: Any) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=_CLOSE)


class _Gate:
    """ASGI middleware: GET only (405), the API key on every route but ``/_srsim/*`` (401)."""

    def __init__(self, app: ASGIApp, *, api_key: str | None) -> None:
        self.app = app
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = None
            if scope["method"] != "GET":
                refusal = json_response(405, {"message": "method not allowed"})
            elif (
                self.api_key is not None
                and _VIA.sub("", scope["path"]) not in _OPEN_PATHS
                and Headers(scope=scope).get("x-api-key") != self.api_key
            ):
                refusal = json_response(401, {"message": "Invalid Authentication"})
            if refusal is not None:
                return await refusal(scope, receive, send)
        await self.app(scope, receive, send)


class _Endpoints:
    """The route handlers of one simulator."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    async def sessions(self, request: Request) -> Response:
        return json_response(200, {"sessions": [s.describe() for s in self.sim.sessions.values()]})

    async def connections(self, request: Request) -> Response:
        return json_response(200, {"connections": [r.as_dict() for r in self.sim.stream_history]})

    async def subscribe(self, request: Request) -> Response | PushStream:
        """SSE by default; ``format=ndjson``: a 302 to the NDJSON stream (``/_push/{sr_id}``)."""
        params, via = request.query_params, request.path_params.get("via", "")
        sr_id = params.get("match", "").removeprefix("sd:match:")
        session = self.sim.sessions.get(sr_id)
        if session is None or session.game.league != request.path_params["league"]:
            return json_response(404, {"message": f"no such match {sr_id}"})
        resume_id = params.get("resume_id", "")
        if params.get("format", "") == "ndjson":
            location = (
                (f"/_via/{via}" if via else "")
                + f"/_push/{sr_id}"
                + (f"?resume_id={quote(resume_id, safe='')}" if resume_id else "")
            )
            return Response(status_code=302, headers={"Location": location, **_CLOSE})
        resume_id = resume_id or request.headers.get("last-event-id", "")
        return self._stream(session, sse=True, resume_id=resume_id, via=via)

    async def push(self, request: Request) -> Response | PushStream:
        session = self.sim.sessions.get(request.path_params["sr_id"])
        if session is None:
            return json_response(404, {"message": "no such stream"})
        resume_id = request.query_params.get("resume_id", "")
        return self._stream(session, sse=False, resume_id=resume_id, via=request.path_params.get("via", ""))

    def _stream(self, session: Session, *, sse: bool, resume_id: str, via: str) -> Response | PushStream:
        sr_id = session.game.sr_id
        start = live = session.position()
        if self.sim.resume and resume_id:
            resumed = self.sim.resume_from(session, resume_id)
            if isinstance(resumed, str):
                logger.info("srsim: resume of %s refused: %s", sr_id, resumed)
                return json_response(410, {"message": resumed})
            logger.info("srsim: %s resumes at message %d (live at %d)", sr_id, resumed, live)
            start = resumed
        return PushStream(self.sim, session, sse=sse, start=start, live=live, via=via)

    async def pbp(self, request: Request) -> Response:
        """The match's play-by-play so far (final versions, deletes left out), or the next fault."""
        sr_id = request.path_params["sr_id"]
        session = self.sim.sessions.get(sr_id)
        if session is None or session.game.league != request.path_params["league"]:
            return json_response(404, {"message": f"no such match {sr_id}"})
        self.sim.pbp_requests[sr_id] += 1
        try:
            fault = self.sim.pbp_faults.pop(0)
        except IndexError:
            fault = None
        if fault is not None:
            logger.info("srsim: play-by-play of %s answers fault %s", sr_id, fault)
        if fault == "503":
            return json_response(503, {"message": "fault: service unavailable"})
        if fault == "404":
            return json_response(404, {"message": f"fault: no such match {sr_id}"})
        if fault == "notjson":
            body = b"<html><body>upstream error</body></html>"
            return Response(body, media_type="application/json", headers=_CLOSE)
        if fault not in (None, "noids"):
            return json_response(500, {"message": f"unknown pbp fault {fault!r} (one of {PBP_FAULTS})"})
        messages = [feed_json.loads(line) for line in session.lines[: session.position()]]
        events = final_events(messages)
        if fault == "noids":
            events = [{k: v for k, v in e.items() if k != "id"} for e in events]
        return json_response(200, {"game": _pbp_game(session, messages), "events": events})

    async def players(self, request: Request) -> Response:
        """The players map file as it is now; 404 without one."""
        path = self.sim.players_file
        if path is None or not path.exists():
            return json_response(404, {"message": "no players map (sim serve --players FILE)"})
        try:
            data = json.loads(path.read_text())
        except ValueError:
            return json_response(500, {"message": "the players map file is not JSON"})
        return json_response(200, data)

    def _served(self, request: Request) -> None:
        """Log a schedule or league request's path, without its ``/_via/{tag}`` (tests read it)."""
        self.sim.schedule_requests.append(_VIA.sub("", request.url.path))

    async def league(self, request: Request) -> Response:
        """One league document; 404 for a league neither the league file nor a game names."""
        self._served(request)
        league, doc = request.path_params["league"], request.path_params["doc"]
        try:
            data = (await asyncio.to_thread(leagues.read_league_file, self.sim.league_file)).get(league)
        except SimulatorScriptError as exc:
            return json_response(500, {"message": str(exc)})
        if data is None:
            games = [s.game for s in self.sim.sessions.values() if s.game.league == league]
            if not games:
                return json_response(404, {"message": f"no such league {league}"})
            data = leagues.default_league(league, games, today=datetime.now(UTC).date())
        if doc == "hierarchy":
            return json_response(200, leagues.hierarchy_document(league, data))
        if doc == "teams":
            return json_response(200, leagues.teams_document(league, data))
        return json_response(200, leagues.seasons_document(data))

    def _games(self, request: Request) -> list[Session]:
        self._served(request)
        league = request.path_params["league"]
        return [s for s in self.sim.sessions.values() if s.game.league == league]

    async def daily(self, request: Request) -> Response:
        p = request.path_params
        day = f"{p['year']}-{p['month']}-{p['day']}"
        games = [s for s in self._games(request) if s.scheduled.date().isoformat() == day]
        league = {"name": p["league"].upper(), "alias": p["league"].upper()}
        listed = [_schedule_game(s) for s in games]
        return json_response(200, {"date": day, "league": league, "games": listed})

    async def weekly(self, request: Request) -> Response:
        p = request.path_params
        week = int(p["week"])
        games = [_schedule_game(s) for s in self._games(request) if s.game.week == week]
        head = {"year": int(p["year"]), "type": p["season"], "name": p["season"]}
        return json_response(200, {**head, "week": {"sequence": week, "title": str(week), "games": games}})

    async def season(self, request: Request) -> Response:
        p = request.path_params
        weeks: dict[int, list[dict[str, Any]]] = {}
        for s in self._games(request):
            weeks.setdefault(s.game.week, []).append(_schedule_game(s))
        head = {"year": int(p["year"]), "type": p["season"], "name": p["season"]}
        listed = [{"sequence": w, "title": str(w), "games": g} for w, g in sorted(weeks.items())]
        return json_response(200, {**head, "weeks": listed})


def _schedule_game(s: Session) -> dict[str, Any]:
    (hn, hm, ha), (an, am, aa) = s.game.home, s.game.away
    return {
        "id": s.game.sr_id,
        "status": s.status(),
        "title": s.game.title,
        "coverage": "full",
        "scheduled": s.scheduled.isoformat(),
        "home": {"name": f"{hm} {hn}", "alias": ha},
        "away": {"name": f"{am} {an}", "alias": aa},
    }


def _pbp_game(s: Session, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The play-by-play's game: the session's status, teams as in the last push payload sent."""
    last = messages[-1].get("payload", {}).get("game", {}) if messages else {}
    home, away = s.game.teams()
    return {
        "id": s.game.sr_id,
        "status": s.status(),
        "scheduled": s.scheduled.isoformat(),
        "home": last.get("home", home),
        "away": last.get("away", away),
    }


def _routes(e: _Endpoints) -> list[BaseRoute]:
    """Every route; an optional path segment (a language, a feed version) is one route per form."""
    base = f"/{{league:{_SLUG}}}/{{access:{_SLUG}}}"
    lang, lang2, version = f"/{{lang:{_LANG}}}", f"/{{lang:{_LANG2}}}", f"/{{version:{_VERSION}}}"
    games = f"/games/{{year:{_YEAR}}}"
    tails: list[tuple[str, Callable[[Request], Any]]] = [
        ("/stream/events/subscribe", e.subscribe),
        (f"/stream{lang}/events/subscribe", e.subscribe),
        *[(f"{p}/games/{{sr_id:{_SR_ID}}}/pbp.json", e.pbp) for p in ("", version, lang2, version + lang2)],
    ]
    for p in ("", lang):
        tails += [
            (f"{p}/league/{{doc:{_LEAGUE_DOC}}}.json", e.league),
            (f"{p}{games}/{{month:{_TWO}}}/{{day:{_TWO}}}/schedule.json", e.daily),
            (f"{p}{games}/{{season:{_SEASON}}}/{{week:{_NUMBER}}}/schedule.json", e.weekly),
            (f"{p}{games}/{{season:{_SEASON}}}/schedule.json", e.season),
        ]
    return [
        Route("/_srsim/sessions", e.sessions),
        Route("/_srsim/connections", e.connections),
        Route(f"/players/{PLAYERS.name}", e.players),
        Route(f"/_push/{{sr_id:{_SR_ID}}}", e.push),
        *[Route(base + tail, handler) for tail, handler in tails],
    ]


async def _not_found(request: Request, exc: Exception) -> Response:
    return json_response(404, {"message": "not found"})


def build_app(sim: Simulator) -> Starlette:
    """The ASGI app serving ``sim``: its routes, also under ``/_via/{tag}``, behind the gate."""
    routes = _routes(_Endpoints(sim))
    return Starlette(
        routes=[*routes, Mount(f"/_via/{{via:{_TAG}}}", routes=routes)],
        middleware=[Middleware(_Gate, api_key=sim.api_key)],
        exception_handlers={404: _not_found},
    )
