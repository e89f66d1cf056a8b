"""Who may call which route: each route's need, bearer-key authentication, the scope and league checks.

Every route of api/routes/ declares its need where it is declared, as a FastAPI ``Security``
dependency: ``dependencies=[requires(Need.OPERATOR, league=LeagueFrom.MATCH)]`` (the trigger
routes get theirs from their queue's declaration, publisher.trigger_queues; the console's routers
declare ``Need.CONSOLE``, its sign-in and files ``Need.PUBLIC``: api/console/ checks its session
cookie itself). Only FastAPI's own document and Swagger UI, which no package here declares, have
their rule in RULES, keyed by method and path template. A route with neither is refused (500) and
fails the table-driven test.
The one application-wide dependency ``authorize`` enforces both. Keys are read from
``Authorization: Bearer KEY`` and never logged or echoed. Scopes rank read < trigger and
read < operator < admin (COVERS, the one declaration). A key limited to leagues may act only on
those: an acting route that acts on one league declares where that league is (``league=``); an
acting route without it acts on every league and is refused to a limited key (reads are not
limited).
"""

from __future__ import annotations

import json
import logging
import time
from enum import StrEnum
from typing import Any

from fastapi import HTTPException, Request, Security, params
from fastapi.routing import iter_route_contexts
from starlette.concurrency import run_in_threadpool

from api.keys import ApiKey, Scope, authenticate, hash_key
from config.errors import Forbidden, NotFound
from lifecycle.match_ref import resolve_match
from publisher.sql.actions import league_of_action

logger = logging.getLogger(__name__)


class Need(StrEnum):
    """What a route needs."""

    PUBLIC = "public"  # no key
    METRICS = "metrics"  # no key, unless API_METRICS_REQUIRE_KEY (then as READ)
    READ = "read"  # a read, trigger-free GET: read, operator or admin keys
    TRIGGER = "trigger"  # triggers, trades, action results, run publishing: trigger, operator or admin keys
    OPERATOR = "operator"  # listener operations, trade reconcile: operator or admin keys
    ADMIN = "admin"  # managing API keys: admin keys only
    CONSOLE = "console"  # console pages and actions: the console checks its session cookie (console.web)


#: What each scope covers: read < trigger, read < operator < admin.
COVERS: dict[Scope, frozenset[Need]] = {
    Scope.ADMIN: frozenset({Need.READ, Need.TRIGGER, Need.OPERATOR, Need.ADMIN}),
    Scope.OPERATOR: frozenset({Need.READ, Need.TRIGGER, Need.OPERATOR}),
    Scope.TRIGGER: frozenset({Need.TRIGGER}),
    Scope.READ: frozenset({Need.READ}),
}

#: The rules of FastAPI's own routes, which cannot declare their need (module docstring).
RULES: dict[tuple[str, str], Need] = {
    ("GET", "/openapi.json"): Need.PUBLIC,
    ("HEAD", "/openapi.json"): Need.PUBLIC,
    ("GET", "/docs"): Need.PUBLIC,
    ("HEAD", "/docs"): Need.PUBLIC,
}


class LeagueFrom(StrEnum):
    """Where an acting route's league is, for a key limited to leagues."""

    BODY = "body"  # the JSON body's league_id (a fantasy league)
    MATCH = "match"  # the league (its name) of the path's match_id
    ACTION = "action"  # the league of the path's tracking_id's action
    DECISION = "decision"  # the body's league_id, else the decision is looked up in the key's leagues only


class DeclaredNeed:
    """The dependency of a route's declared need (``requires``); ``authorize`` checks it before any
    of the route's own dependencies run, so calling it does nothing more."""

    def __init__(self, league: LeagueFrom | None) -> None:
        self.league = league

    def __call__(self) -> None:
        return None


def requires(need: Need, *, league: LeagueFrom | None = None) -> params.Security:
    """A route's need, declared on the route (``dependencies=[requires(...)]``): the scope ``need``
    and, for an acting route that acts on one league, where that league is (``league``)."""
    return Security(DeclaredNeed(league), scopes=[need.value])


def declared_rule(route: Any) -> tuple[Need, LeagueFrom | None] | None:
    """The need and league source ``route`` declares with ``requires``, or None."""
    for dependency in getattr(route, "dependencies", None) or ():
        if isinstance(getattr(dependency, "dependency", None), DeclaredNeed):
            return Need(dependency.scopes[0]), dependency.dependency.league
    return None


def _rule(method: str, route: Any) -> tuple[Need | None, LeagueFrom | None]:
    """What ``route`` needs for ``method`` and where its league is: its declaration, else the tables."""
    declared = declared_rule(route)
    if declared is not None:
        return declared
    path = getattr(route, "path", None)
    if path is None:
        return None, None
    return RULES.get((method, path)), None


def route_rules(app: Any) -> dict[tuple[str, str], Need]:
    """Every (method, path template) the application serves with what it needs (None: no rule)."""

    out: dict[tuple[str, str], Need] = {}
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        path = context.path or getattr(route, "path", None)
        for method in sorted(getattr(route, "methods", None) or ()):
            declared = declared_rule(route)
            out[(method, path)] = declared[0] if declared is not None else RULES.get((method, path))
    return out


def bearer_key(request: Request) -> str | None:
    """The key of ``Authorization: Bearer KEY``, or None."""
    header = request.headers.get("authorization")
    if not header:
        return None
    kind, _, key = header.partition(" ")
    key = key.strip()
    if kind.lower() != "bearer" or not key:
        return None
    return key


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


class KeyCache:
    """Keys that authenticated recently, by hash, for API_KEY_CACHE_SECONDS (0: ask PostgreSQL every time).

    Only valid keys are kept; a revoked key is refused once its entry expires.
    """

    def __init__(self, ttl_seconds: float) -> None:
        self.ttl = ttl_seconds
        self._entries: dict[str, tuple[ApiKey, float]] = {}

    async def lookup(self, key: str) -> ApiKey | None:
        digest = hash_key(key)
        now = time.monotonic()
        entry = self._entries.get(digest)
        if entry is not None and entry[1] > now:
            return entry[0]
        found = await run_in_threadpool(authenticate, key)
        if found is not None and self.ttl > 0:
            if len(self._entries) > 10_000:
                self._entries.clear()
            self._entries[digest] = (found, now + self.ttl)
        return found

    def forget(self, key_id: str) -> None:
        """Drop key ``key_id`` from the cache (revoked here: refused at once, not when its entry expires)."""
        for digest, (key, _) in list(self._entries.items()):
            if key.id == str(key_id):
                self._entries.pop(digest, None)


async def authorize(request: Request) -> ApiKey | None:
    """The application-wide dependency: look up the route's rule, then check key and scope."""
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    need, league_from = _rule(request.method, route)
    if need is None:
        logger.error("route without an auth rule refused: %s %s", request.method, path)
        raise HTTPException(status_code=500, detail="route has no auth rule")
    if need in (Need.PUBLIC, Need.CONSOLE):
        return None
    if need is Need.METRICS:
        if not request.app.state.ctx.settings.api_metrics_require_key:
            return None
        need = Need.READ
    key = bearer_key(request)
    if key is None:
        raise _unauthorized("an API key is required (Authorization: Bearer KEY)")
    found = await request.app.state.key_cache.lookup(key)
    if found is None:
        raise _unauthorized("the API key is not valid (unknown or revoked)")
    if need not in COVERS[found.scope]:
        raise HTTPException(
            status_code=403, detail=f"a {found.scope.value} key does not cover this route (needs {need})"
        )
    if found.leagues is not None and request.method not in ("GET", "HEAD"):
        await _check_league(request, found, league_from)
    request.state.api_key = found
    request.state.api_key_id = found.id
    request.state.api_key_name = found.name  # the audit log's "who" (api.headers.actor_of)
    return found


def _limited(key: ApiKey) -> str:
    return f"key {key.name!r} is limited to league(s) {', '.join(key.leagues or ())}"


async def _check_league(request: Request, key: ApiKey, source: LeagueFrom | None) -> None:
    """Forbidden (403) unless the route acts on one of ``key``'s leagues; a league that cannot be
    read (a body that is no JSON object, an unknown match or action) is left to the route's answer."""
    if source is None:
        raise Forbidden(f"{_limited(key)}: this route acts on every league")
    league: str | None = None
    if source in (LeagueFrom.BODY, LeagueFrom.DECISION):
        try:
            body = json.loads(await request.body() or b"null")
        except ValueError:
            return
        value = body.get("league_id") if isinstance(body, dict) else None
        league = value if isinstance(value, str) else None
        # a decision without a named league is looked up among the key's leagues only (the route)
    elif source is LeagueFrom.MATCH:
        league = await run_in_threadpool(_league_of_match, request.path_params.get("match_id", ""))
    else:
        league = await run_in_threadpool(league_of_action, request.path_params.get("tracking_id", ""))
    if league is None:
        return
    if not key.covers_league(league) and not (
        source is LeagueFrom.MATCH and league.casefold() in {x.casefold() for x in key.leagues or ()}
    ):
        raise Forbidden(f"{_limited(key)}: it may not act on league {league}")


def _league_of_match(ref: str) -> str | None:
    try:
        return str(resolve_match(ref).league.name)
    except NotFound:
        return None


def reads_league(request: Request, league: str | None) -> bool:
    """Whether the request's key may read what belongs to ``league`` (a fantasy league id or a match's
    league name, compared in any case): every key not limited to leagues, else only its leagues."""
    key = getattr(request.state, "api_key", None)
    if key is None or key.leagues is None:
        return True
    return league is not None and league.casefold() in {x.casefold() for x in key.leagues}


def limited_key(request: Request) -> ApiKey | None:
    """The request's key when it is limited to leagues, else None."""
    key = getattr(request.state, "api_key", None)
    return key if key is not None and key.leagues is not None else None


def may_act_for(key: ApiKey, creator_key_id: str | None) -> bool:
    """Whether ``key`` may act on what ``creator_key_id`` created (its own, nobody's recorded, or an
    operator or admin key)."""
    return creator_key_id is None or str(creator_key_id) == key.id or Need.OPERATOR in COVERS[key.scope]


def route_table(app: Any) -> list[tuple[str, str]]:
    """Every (method, path template) the application serves, included routers flattened."""

    out = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        path = context.path or getattr(route, "path", None)
        for method in sorted(getattr(route, "methods", None) or ()):
            out.append((method, path))
    return out
