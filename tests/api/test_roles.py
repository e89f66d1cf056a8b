"""Identities and roles over HTTP: admin keys manage keys, league-limited keys, who created an action."""

from __future__ import annotations

import httpx
import pytest

from api.keys import Scope, create_key
from models.audit import audit_entries
from tests.api.conftest import Server, bearer
from tests.api.test_trades_actions_runs import trade_queues  # noqa: F401 (a fixture)
from tests.api.test_triggers import LINEUP
from tests.console.conftest import sign_in

pytestmark = pytest.mark.services


def _post(server: Server, path: str, key: str, body: dict) -> httpx.Response:
    return httpx.post(server.url + path, json=body, headers=bearer(key), timeout=60)


def test_only_an_admin_key_manages_keys_and_a_revoked_key_fails_at_once(api_server, keys, fresh_queues):
    url = f"{api_server.url}/v1/apikeys"
    body = {"name": "bot", "scope": "trigger", "reason": "the lineup bot"}
    for narrow in ("operator", "trigger", "read"):
        refused = httpx.post(url, json=body, headers=bearer(keys[narrow]), timeout=60)
        assert refused.status_code == 403, (narrow, refused.text)
    created = httpx.post(url, json=body, headers=bearer(keys["admin"]), timeout=60)
    assert created.status_code == 201, created.text
    new = created.json()
    assert new["scope"] == "trigger" and new["leagues"] is None and new["revoked"] is False
    assert new["key"].startswith("kk_")
    assert _post(api_server, "/v1/trigger/lineup", new["key"], LINEUP).status_code in (200, 202)
    listed = httpx.get(url, headers=bearer(keys["admin"]), timeout=60).json()["keys"]
    row = next(k for k in listed if k["id"] == new["id"])
    assert row == {k: new[k] for k in row} and "key" not in row  # the secret is never listed
    gone = httpx.delete(f"{url}/{new['id']}", headers=bearer(keys["admin"]), timeout=60)
    assert gone.status_code == 200 and gone.json()["revoked"] is True
    assert _post(api_server, "/v1/trigger/lineup", new["key"], LINEUP).status_code == 401
    assert httpx.delete(f"{url}/{new['id']}", headers=bearer(keys["operator"]), timeout=60).status_code == 403
    acts = {e.action: e for e in audit_entries() if e.target_id == new["id"]}
    assert acts["apikey.create"].who == "test-admin" and acts["apikey.create"].reason == "the lineup bot"
    assert acts["apikey.revoke"].who_key_id is not None and new["key"] not in str(acts["apikey.create"].after)


def test_a_league_limited_key_acts_on_its_leagues_only(api_server, keys, trade_queues, make_match):  # noqa: F811
    created = httpx.post(
        f"{api_server.url}/v1/apikeys",
        json={"name": "l1-bot", "scope": "operator", "leagues": ["L1", "nfl"]},
        headers=bearer(keys["admin"]),
        timeout=60,
    )
    assert created.status_code == 201, created.text
    limited = created.json()["key"]
    assert _post(api_server, "/v1/trigger/lineup", limited, LINEUP).status_code in (200, 202)
    other = _post(api_server, "/v1/trigger/lineup", limited, {**LINEUP, "league_id": "L9"})
    assert other.status_code == 403 and "L9" in other.json()["error"], other.text
    assert _post(
        api_server, "/v1/trigger/lineup", keys["operator"], {**LINEUP, "league_id": "L9"}
    ).status_code in (
        200,
        202,
    )  # an unlimited key is unaffected
    decision = {"league_id": "L9", "team_id": "7", "decision": "accept"}
    assert (
        _post(api_server, "/v1/trade/incoming/t-l9/decision", keys["operator"], decision).status_code == 202
    )
    retry = _post(api_server, "/v1/trade/incoming/t-l9/decision/retry", limited, {})
    assert retry.status_code == 404 and "L9" not in retry.text, retry.text  # another league's: as if absent
    mine, theirs = make_match("nfl"), make_match("mlb")
    assert (
        _post(api_server, f"/v1/matches/{mine.id}/auto-dispatch", limited, {"on": False}).status_code == 200
    )
    refused = _post(api_server, f"/v1/matches/{theirs.id}/auto-dispatch", limited, {"on": False})
    assert refused.status_code == 403 and "mlb" in refused.json()["error"], refused.text
    sweep = _post(api_server, "/v1/listeners/sweep", limited, {})
    assert sweep.status_code == 403 and "every league" in sweep.json()["error"]
    console = httpx.post(f"{api_server.url}/sign-in", data={"api_key": limited}, timeout=60)
    assert console.status_code == 303  # to its leagues' board only (tests/console/test_league_limits)


def test_only_the_creating_key_or_an_operator_reports_an_action_and_the_action_names_its_creator(
    api_server, keys, fresh_queues
):
    other = create_key(name="other-bot", scope=Scope.TRIGGER)[1]
    made = _post(api_server, "/v1/trigger/lineup", keys["trigger"], LINEUP)
    tracking_id = made.json()["tracking_id"]
    shown = httpx.get(f"{api_server.url}/v1/actions/{tracking_id}", headers=bearer(keys["read"]), timeout=60)
    creator = shown.json()["created_by"]
    assert creator["name"] == "test-trigger" and creator["key_id"]
    result = f"/v1/actions/{tracking_id}/result"
    refused = _post(api_server, result, other, {"outcome": "succeeded"})
    assert refused.status_code == 403 and "another API key" in refused.json()["error"], refused.text
    assert _post(api_server, result, keys["trigger"], {"outcome": "succeeded"}).status_code == 202
    assert _post(api_server, result, keys["operator"], {"outcome": "failed"}).status_code == 202
    run_id = _post(api_server, "/v1/runs", keys["trigger"], {"job": "noop", "params": {}}).json()["run_id"]
    run = httpx.get(f"{api_server.url}/v1/runs/{run_id}", headers=bearer(keys["read"]), timeout=60).json()
    assert run["created_by_key_id"] == creator["key_id"]  # a run records its key too


def test_the_console_keys_page_lists_creates_and_revokes_for_an_admin(api_server, keys, fresh_queues):
    operator = sign_in(api_server, keys["operator"])
    admin = sign_in(api_server, keys["admin"])
    try:
        assert operator.client.get("/keys").status_code == 403
        assert 'href="/keys"' not in operator.client.get("/").text
        page = admin.client.get("/keys")
        assert page.status_code == 200 and "test-read" in page.text
        refused = admin.client.post("/keys", data={"name": "web", "scope": "read"})  # no CSRF token
        assert refused.status_code == 403
        made = admin.client.post("/keys", data={"csrf_token": admin.csrf, "name": "web", "scope": "read"})
        assert made.status_code == 200 and "shown this once" in made.text
        key_id = next(k for k in _listed(api_server, keys) if k["name"] == "web")["id"]
        revoked = admin.client.post(
            f"/keys/{key_id}/revoke", data={"csrf_token": admin.csrf}, follow_redirects=False
        )
        assert revoked.status_code == 303 and "revoked" in revoked.headers["location"]
        assert next(k for k in _listed(api_server, keys) if k["id"] == key_id)["revoked"] is True
    finally:
        operator.client.close()
        admin.client.close()


def _listed(server: Server, keys: dict[str, str]) -> list[dict]:
    return httpx.get(f"{server.url}/v1/apikeys", headers=bearer(keys["admin"]), timeout=60).json()["keys"]
