"""Who may call which route: the rule table, bearer-key authentication and the scope check.

Every route of the application has one rule in RULES, keyed by method and path template; a
route without a rule is refused (500) and fails the table-driven test. Keys are read from
``Authorization: Bearer KEY`` and never logged or echoed.
"""

from __future__ import annotations

import logging
import time
from enum import StrEnum
from typing import Any

from fastapi import HTTPException, Request
from starlette.concurrency import run_in_threadpool

from api.keys import ApiKey, Scope, authenticate, hash_key

logger = logging.getLogger(__name__)


class Need(StrEnum):
    """What a route needs."""

    PUBLIC = "public"  # no key
    METRICS = "metrics"  # no key, unless API_METRICS_REQUIRE_KEY (then as READ)
    READ = "read"  # a read, trigger-free GET: read or operator keys
    TRIGGER = "trigger"  # triggers, trades, action results, run publishing: trigger or operator keys
    OPERATOR = "operator"  # listener operations: operator keys only
    CONSOLE = "console"  # console pages and actions: the console checks its session cookie (console.web)


COVERS: dict[Scope, frozenset[Need]] = {
    Scope.OPERATOR: frozenset({Need.READ, Need.TRIGGER, Need.OPERATOR}),
    Scope.TRIGGER: frozenset({Need.TRIGGER}),
    Scope.READ: frozenset({Need.READ}),
}

RULES: dict[tuple[str, str], Need] = {
    ("GET", "/healthz"): Need.PUBLIC,
    ("GET", "/readyz"): Need.PUBLIC,
    ("GET", "/metrics"): Need.METRICS,
    ("GET", "/openapi.json"): Need.PUBLIC,
    ("HEAD", "/openapi.json"): Need.PUBLIC,
    ("GET", "/docs"): Need.PUBLIC,
    ("HEAD", "/docs"): Need.PUBLIC,
    ("GET", "/asyncapi.yaml"): Need.PUBLIC,
    ("GET", "/asyncapi.json"): Need.PUBLIC,
    ("POST", "/v1/trigger/lineup"): Need.TRIGGER,
    ("POST", "/v1/trigger/waiver"): Need.TRIGGER,
    ("POST", "/v1/trigger/draft-pick"): Need.TRIGGER,
    ("POST", "/v1/trigger/rumor-action"): Need.TRIGGER,
    ("POST", "/v1/trade/offers/{offer_key}/approve"): Need.TRIGGER,
    ("POST", "/v1/trade/incoming/{trade_id}/decision"): Need.TRIGGER,
    ("POST", "/v1/trade/incoming/{trade_id}/decision/retry"): Need.TRIGGER,
    ("POST", "/v1/trade/incoming/{trade_id}/counter"): Need.TRIGGER,
    ("GET", "/v1/trade/reconcile"): Need.READ,
    ("POST", "/v1/trade/reconcile"): Need.OPERATOR,
    ("GET", "/v1/actions/{tracking_id}"): Need.READ,
    ("POST", "/v1/actions/{tracking_id}/result"): Need.TRIGGER,
    ("POST", "/v1/runs"): Need.TRIGGER,
    ("GET", "/v1/runs"): Need.READ,
    ("GET", "/v1/runs/{run_id}"): Need.READ,
    ("GET", "/v1/listeners"): Need.READ,
    ("GET", "/v1/matches/{match_id}"): Need.READ,
    ("GET", "/v1/matches/{match_id}/archive/verify"): Need.READ,
    ("POST", "/v1/matches/{match_id}/start-listener"): Need.OPERATOR,
    ("POST", "/v1/matches/{match_id}/stop-listener"): Need.OPERATOR,
    ("POST", "/v1/matches/{match_id}/auto-dispatch"): Need.OPERATOR,
    ("POST", "/v1/listeners/dispatch"): Need.OPERATOR,
    ("POST", "/v1/listeners/sweep"): Need.OPERATOR,
    ("POST", "/v1/listeners/bulk"): Need.OPERATOR,
    ("GET", "/v1/audit"): Need.READ,
    # The console (package api/console/): sign-in and its assets are public; every other page and
    # action checks the console session itself (pages: a session; posts: a session, the CSRF
    # token and, for actions, an operator key).
    ("GET", "/sign-in"): Need.PUBLIC,
    ("POST", "/sign-in"): Need.PUBLIC,
    ("GET", "/static/{name}"): Need.PUBLIC,
    ("POST", "/sign-out"): Need.CONSOLE,
    ("GET", "/"): Need.CONSOLE,
    ("GET", "/events/board"): Need.CONSOLE,
    ("POST", "/board/dispatch"): Need.CONSOLE,
    ("POST", "/board/sweep"): Need.CONSOLE,
    ("POST", "/board/bulk"): Need.CONSOLE,
    ("POST", "/board/bulk/confirm"): Need.CONSOLE,
    ("GET", "/matches/{match_id}"): Need.CONSOLE,
    ("GET", "/matches/{match_id}/archive"): Need.CONSOLE,
    ("GET", "/matches/{match_id}/runs/{record_id}/log"): Need.CONSOLE,
    ("POST", "/matches/{match_id}/start"): Need.CONSOLE,
    ("POST", "/matches/{match_id}/stop"): Need.CONSOLE,
    ("POST", "/matches/{match_id}/auto-dispatch"): Need.CONSOLE,
    ("POST", "/matches/{match_id}/settings"): Need.CONSOLE,
    ("GET", "/clone"): Need.CONSOLE,
    ("POST", "/clone"): Need.CONSOLE,
    ("GET", "/outbox"): Need.CONSOLE,
    ("POST", "/outbox/{row_id}/retry"): Need.CONSOLE,
    ("GET", "/actions"): Need.CONSOLE,
    ("GET", "/trades"): Need.CONSOLE,
    ("POST", "/trades/reconcile"): Need.CONSOLE,
    ("GET", "/runs"): Need.CONSOLE,
    ("POST", "/runs"): Need.CONSOLE,
    ("GET", "/runs/new"): Need.CONSOLE,
    ("GET", "/runs/{run_id}"): Need.CONSOLE,
    ("POST", "/runs/{run_id}/retry"): Need.CONSOLE,
    ("POST", "/runs/{run_id}/cancel"): Need.CONSOLE,
    ("GET", "/queues"): Need.CONSOLE,
    ("GET", "/audit"): Need.CONSOLE,
}


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


async def authorize(request: Request) -> ApiKey | None:
    """The application-wide dependency: look up the route's rule, then check key and scope."""
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    need = RULES.get((request.method, path)) if path is not None else None
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
    request.state.api_key_id = found.id
    request.state.api_key_name = found.name  # the audit log's "who" (api.headers.actor_of)
    return found


def route_table(app: Any) -> list[tuple[str, str]]:
    """Every (method, path template) the application serves, included routers flattened."""
    from fastapi.routing import iter_route_contexts

    out = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        path = context.path or getattr(route, "path", None)
        for method in sorted(getattr(route, "methods", None) or ()):
            out.append((method, path))
    return out
