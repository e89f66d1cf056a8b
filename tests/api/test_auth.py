"""Who may call each route, from a table kept here (docs/api.md, docs/console.md); keys never leak.

``EXPECTED`` is written out by hand, not read from ``api/auth.py``: the application must serve
exactly its routes, and for each route every key kind (none, read, trigger, operator, admin) gets a real
request. Refused means 401 or 403 (a console page without a session: its redirect to the sign-in
form); allowed means neither of those nor a 5xx.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import httpx
import pytest

from api.app import create_app
from api.auth import route_table
from api.keys import Scope, authenticate, create_key, hash_key, list_keys, revoke_key
from tests.api.conftest import Server, bearer
from tests.console.conftest import sign_in
from tests.waiting import wait_for

#: What a route needs, and the key kinds that need lets in (docs/api.md "Need").
NONE, READ, TRIGGER, OPERATOR, ADMIN = "none", "read", "trigger", "operator", "admin"
KINDS = (NONE, READ, TRIGGER, OPERATOR, ADMIN)
LETS_IN = {
    NONE: {NONE, READ, TRIGGER, OPERATOR, ADMIN},
    READ: {READ, OPERATOR, ADMIN},
    TRIGGER: {TRIGGER, OPERATOR, ADMIN},
    OPERATOR: {OPERATOR, ADMIN},
    ADMIN: {ADMIN},
}
#: The doors a key comes through: the API's bearer header, or a console session opened with it.
API, CONSOLE = "api", "console"

#: Every route the application serves: (method, path template) -> (door, need).
#: A new route is one line here, with the need its docs give it.
EXPECTED: dict[tuple[str, str], tuple[str, str]] = {
    # health, metrics (API_METRICS_REQUIRE_KEY off) and the OpenAPI document
    ("GET", "/healthz"): (API, NONE),
    ("GET", "/readyz"): (API, NONE),
    ("GET", "/metrics"): (API, NONE),
    ("GET", "/openapi.json"): (API, NONE),
    ("HEAD", "/openapi.json"): (API, NONE),
    ("GET", "/docs"): (API, NONE),
    ("HEAD", "/docs"): (API, NONE),
    # the queues' contract (docs/asyncapi.yaml)
    ("GET", "/asyncapi.yaml"): (API, NONE),
    ("GET", "/asyncapi.json"): (API, NONE),
    # triggers
    ("POST", "/v1/trigger/lineup"): (API, TRIGGER),
    ("POST", "/v1/trigger/waiver"): (API, TRIGGER),
    ("POST", "/v1/trigger/draft-pick"): (API, TRIGGER),
    ("POST", "/v1/trigger/rumor-action"): (API, TRIGGER),
    # trades
    ("POST", "/v1/trade/offers/{offer_key}/approve"): (API, TRIGGER),
    ("POST", "/v1/trade/incoming/{trade_id}/decision"): (API, TRIGGER),
    ("POST", "/v1/trade/incoming/{trade_id}/decision/retry"): (API, TRIGGER),
    ("POST", "/v1/trade/incoming/{trade_id}/counter"): (API, TRIGGER),
    ("GET", "/v1/trade/reconcile"): (API, READ),
    ("POST", "/v1/trade/reconcile"): (API, OPERATOR),
    # actions
    ("GET", "/v1/actions/{tracking_id}"): (API, READ),
    ("POST", "/v1/actions/{tracking_id}/result"): (API, TRIGGER),
    # job runs
    ("POST", "/v1/runs"): (API, TRIGGER),
    ("GET", "/v1/runs"): (API, READ),
    ("GET", "/v1/runs/{run_id}"): (API, READ),
    # listeners and matches
    ("GET", "/v1/listeners"): (API, READ),
    ("GET", "/v1/matches/{match_id}"): (API, READ),
    ("POST", "/v1/matches/{match_id}/archive/verify"): (API, OPERATOR),
    ("GET", "/v1/matches/{match_id}/archive"): (API, READ),
    ("POST", "/v1/matches/{match_id}/start-listener"): (API, OPERATOR),
    ("POST", "/v1/matches/{match_id}/stop-listener"): (API, OPERATOR),
    ("POST", "/v1/matches/{match_id}/auto-dispatch"): (API, OPERATOR),
    ("POST", "/v1/listeners/dispatch"): (API, OPERATOR),
    ("POST", "/v1/listeners/sweep"): (API, OPERATOR),
    ("POST", "/v1/listeners/bulk"): (API, OPERATOR),
    # the audit log
    ("GET", "/v1/audit"): (API, READ),
    # history
    ("GET", "/v1/history/{series}"): (API, READ),
    # API keys
    ("GET", "/v1/apikeys"): (API, ADMIN),
    ("POST", "/v1/apikeys"): (API, ADMIN),
    ("DELETE", "/v1/apikeys/{key_id}"): (API, ADMIN),
    # the console (docs/console.md): pages need a read, operator or admin session, actions an
    # operator one, the Keys page an admin one
    ("GET", "/sign-in"): (CONSOLE, NONE),
    ("POST", "/sign-in"): (CONSOLE, READ),  # a trigger key cannot sign in
    ("GET", "/static/{name}"): (CONSOLE, NONE),
    ("POST", "/sign-out"): (CONSOLE, READ),
    ("GET", "/"): (CONSOLE, READ),
    ("GET", "/events/board"): (CONSOLE, READ),
    ("GET", "/matches"): (CONSOLE, READ),
    ("GET", "/events/matches"): (CONSOLE, READ),
    ("GET", "/history"): (CONSOLE, READ),
    ("GET", "/history/data/{series}"): (CONSOLE, READ),
    ("POST", "/board/dispatch"): (CONSOLE, OPERATOR),
    ("POST", "/board/sweep"): (CONSOLE, OPERATOR),
    ("POST", "/board/bulk"): (CONSOLE, OPERATOR),
    ("POST", "/board/bulk/confirm"): (CONSOLE, OPERATOR),
    ("GET", "/matches/{match_id}"): (CONSOLE, READ),
    ("GET", "/matches/{match_id}/archive"): (CONSOLE, READ),
    ("GET", "/matches/{match_id}/runs/{record_id}/log"): (CONSOLE, READ),
    ("POST", "/matches/{match_id}/start"): (CONSOLE, OPERATOR),
    ("POST", "/matches/{match_id}/stop"): (CONSOLE, OPERATOR),
    ("POST", "/matches/{match_id}/auto-dispatch"): (CONSOLE, OPERATOR),
    ("POST", "/matches/{match_id}/settings"): (CONSOLE, OPERATOR),
    ("GET", "/clone"): (CONSOLE, READ),
    ("POST", "/clone"): (CONSOLE, OPERATOR),
    ("GET", "/outbox"): (CONSOLE, READ),
    ("POST", "/outbox/{row_id}/retry"): (CONSOLE, OPERATOR),
    ("GET", "/actions"): (CONSOLE, READ),
    ("GET", "/runs"): (CONSOLE, READ),
    ("POST", "/runs"): (CONSOLE, OPERATOR),
    ("GET", "/runs/new"): (CONSOLE, READ),
    ("GET", "/runs/{run_id}"): (CONSOLE, READ),
    ("POST", "/runs/{run_id}/retry"): (CONSOLE, OPERATOR),
    ("POST", "/runs/{run_id}/cancel"): (CONSOLE, OPERATOR),
    ("GET", "/trades"): (CONSOLE, READ),
    ("POST", "/trades/reconcile"): (CONSOLE, OPERATOR),
    ("GET", "/queues"): (CONSOLE, READ),
    ("GET", "/audit"): (CONSOLE, READ),
    ("GET", "/keys"): (CONSOLE, ADMIN),
    ("POST", "/keys"): (CONSOLE, ADMIN),
    ("POST", "/keys/{key_id}/revoke"): (CONSOLE, ADMIN),
}

#: A value for each path parameter (a route with a new parameter adds it here).
PATH_VALUES = {
    "offer_key": "o-auth",
    "trade_id": "t-auth",
    "tracking_id": "00000000-0000-4000-8000-000000000000",
    "run_id": "00000000-0000-4000-8000-000000000001",
    "match_id": "00000000-0000-4000-8000-000000000002",
    "record_id": "00000000-0000-4000-8000-000000000003",
    "row_id": "1",
    "key_id": "00000000-0000-4000-8000-000000000004",
    "name": "console.css",
    "series": "events",
}


def _url(path: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: PATH_VALUES[m.group(1)], path)


def test_the_application_serves_exactly_the_routes_of_the_table(settings):
    served = set(route_table(create_app(settings)))
    assert sorted(served - EXPECTED.keys()) == [], "routes missing from EXPECTED (add them with their need)"
    assert sorted(EXPECTED.keys() - served) == [], "routes of EXPECTED the application does not serve"


def test_every_path_parameter_of_the_table_has_a_value():
    params = {p for _, path in EXPECTED for p in re.findall(r"{(\w+)}", path)}
    assert params <= PATH_VALUES.keys()


def _refused(door: str, method: str, answer: httpx.Response) -> bool:
    if answer.status_code in (401, 403):
        return True
    to_sign_in = answer.headers.get("location", "").startswith("/sign-in?next=")
    return door == CONSOLE and method == "GET" and answer.status_code == 303 and to_sign_in


def _api_call(server: Server, method: str, path: str, key: str | None) -> httpx.Response:
    headers = bearer(key) if key else {}
    body = {"json": {}} if method == "POST" else {}
    return httpx.request(method, server.url + _url(path), headers=headers, timeout=60, **body)


def _console_call(server: Server, method: str, path: str, key: str | None, kind: str) -> httpx.Response:
    """The key through the console's door: the sign-in form's field, else a session opened with it."""
    url = server.url + _url(path)
    if path == "/sign-in" and method == "POST":
        return httpx.post(url, data={"api_key": key or ""}, timeout=60, follow_redirects=False)
    if kind not in (READ, OPERATOR, ADMIN):  # no key, or one the console does not take: no session
        return httpx.request(method, url, timeout=60, follow_redirects=False)
    signed = sign_in(server, key)
    headers = {"x-csrf-token": signed.csrf} if method == "POST" else {}
    try:
        if path in ("/events/board", "/events/matches"):  # a stream that does not end: status and headers
            with signed.client.stream(method, url, headers=headers, follow_redirects=False) as answer:
                return httpx.Response(answer.status_code, headers=answer.headers)
        return signed.client.request(method, url, headers=headers, follow_redirects=False)
    finally:
        signed.client.close()


ROUTES = sorted(EXPECTED)


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_each_key_kind_is_refused_or_let_in_as_the_table_says(api_server, keys, fresh_queues, method, path):
    door, need = EXPECTED[(method, path)]
    key_of: dict[str, str | None] = {NONE: None, **{scope.value: keys[scope.value] for scope in Scope}}
    call: Callable[[str], httpx.Response] = (
        (lambda kind: _api_call(api_server, method, path, key_of[kind]))
        if door == API
        else (lambda kind: _console_call(api_server, method, path, key_of[kind], kind))
    )
    for kind in KINDS:
        answer = call(kind)
        status = answer.status_code
        if kind in LETS_IN[need]:
            assert not _refused(door, method, answer) and status < 500, (kind, status, answer.text[:300])
        else:
            assert _refused(door, method, answer), (kind, status, answer.text[:300])
        for key in keys.values():
            assert key not in answer.text, kind


API_KEYED = [route for route in ROUTES if EXPECTED[route][0] == API and EXPECTED[route][1] != NONE]


@pytest.mark.parametrize(("method", "path"), API_KEYED, ids=[f"{m} {p}" for m, p in API_KEYED])
def test_a_keyed_route_refuses_a_missing_an_unknown_and_a_non_bearer_key_with_401(
    api_server, keys, method, path
):
    missing = _api_call(api_server, method, path, None)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert _api_call(api_server, method, path, "kk_not-a-key").status_code == 401
    basic = {"Authorization": f"Basic {keys['operator']}"}
    assert httpx.request(method, api_server.url + _url(path), headers=basic, timeout=60).status_code == 401


def test_public_routes_need_no_key(api_server, db, fresh_queues):
    for (method, path), (_door, need) in EXPECTED.items():
        if need == NONE and method == "GET":
            assert httpx.get(api_server.url + _url(path), timeout=60).status_code == 200, path


def test_metrics_can_require_a_key(broken_server, keys):
    url = broken_server.url + "/metrics"
    assert httpx.get(url, timeout=60).status_code == 401
    assert httpx.get(url, headers=bearer(keys["trigger"]), timeout=60).status_code == 403
    assert httpx.get(url, headers=bearer(keys["read"]), timeout=60).status_code == 200


def test_a_revoked_key_is_refused_once_the_cache_entry_expires(api_server, db):
    key_row, key = create_key(name="short-lived", scope=Scope.READ)
    url = api_server.url + "/v1/runs"
    assert httpx.get(url, headers=bearer(key), timeout=60).status_code == 200
    revoke_key(key_row.id)
    revoked_at = time.monotonic()
    wait_for(
        lambda: httpx.get(url, headers=bearer(key), timeout=60).status_code == 401,
        timeout=60,
        what="the revoked key to be refused",
    )
    # API_KEY_CACHE_SECONDS (2 s by default) bounds it; a loaded machine may add scheduling delay
    assert time.monotonic() - revoked_at < 30


def test_keys_are_stored_hashed_and_never_logged(api_server, keys):
    assert authenticate(keys["read"]) is not None
    for scope, key in keys.items():
        assert key.startswith("kk_") and len(key) > 40
        listed = [k.as_dict() for k in list_keys()]
        assert all(key not in str(row) for row in listed), scope
        assert hash_key(key) != key
    httpx.get(api_server.url + "/v1/runs", headers=bearer(keys["read"] + "x"), timeout=60)
    log = api_server.log()
    assert all(key not in log for key in keys.values())
