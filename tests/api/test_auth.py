"""Auth rules, table-driven from the application's own route list; keys never leak."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from api.app import create_app
from api.auth import COVERS, RULES, Need, route_table
from api.keys import Scope, authenticate, create_key, hash_key, list_keys, revoke_key
from tests.api.conftest import bearer
from tests.waiting import wait_for

DUMMY = {
    "offer_key": "o-auth",
    "trade_id": "t-auth",
    "tracking_id": "00000000-0000-4000-8000-000000000000",
    "run_id": "00000000-0000-4000-8000-000000000001",
    "match_id": "00000000-0000-4000-8000-000000000002",
    "name": "console.css",
}


def _url(path: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: DUMMY[m.group(1)], path)


def test_every_route_of_the_application_has_an_auth_rule(settings):
    app = create_app(settings)
    served = route_table(app)
    missing = [r for r in served if r not in RULES]
    assert missing == [], f"routes without an auth rule in api/auth.RULES: {missing}"
    stale = [r for r in RULES if r not in served]
    assert stale == [], f"rules for routes the application does not serve: {stale}"


KEYED = sorted(
    ((method, path), need)
    for (method, path), need in RULES.items()
    if need not in (Need.PUBLIC, Need.METRICS, Need.CONSOLE)  # the console's: tests/console
)


@pytest.mark.parametrize(("route", "need"), KEYED, ids=[f"{m} {p}" for (m, p), _ in KEYED])
def test_each_rule(api_server, keys, fresh_queues, route, need):
    method, path = route
    url = api_server.url + _url(path)

    def call(headers: dict[str, str]) -> httpx.Response:
        kwargs = {"json": {}} if method == "POST" else {}
        return httpx.request(method, url, headers=headers, timeout=60, **kwargs)

    no_key = call({})
    assert no_key.status_code == 401 and no_key.headers["www-authenticate"] == "Bearer"
    assert call(bearer("kk_not-a-key")).status_code == 401
    assert call({"Authorization": f"Basic {keys['operator']}"}).status_code == 401
    for scope in Scope:
        answer = call(bearer(keys[scope.value]))
        if need in COVERS[scope]:
            assert answer.status_code not in (401, 403), (scope, answer.text)
        else:
            assert answer.status_code == 403, (scope, answer.text)
        assert keys[scope.value] not in answer.text


def test_public_routes_need_no_key(api_server, db):
    for (method, path), need in RULES.items():
        if need is Need.PUBLIC and method == "GET":
            assert httpx.get(api_server.url + _url(path), timeout=60).status_code == 200, path
    assert httpx.get(api_server.url + "/metrics", timeout=60).status_code == 200


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
