"""`kickoff apikeys`: the key is printed once, list never shows it, revoke refuses it at once."""

from __future__ import annotations

import json

import httpx

from api.keys import hash_key
from models.db import database
from tests.api.conftest import bearer
from tests.api.test_trigger_http import _kickoff
from tests.waiting import wait_for


def test_create_list_revoke(api_server, server_env, db):
    created = _kickoff(["apikeys", "create", "--name", "ci", "--scope", "read", "--json"], server_env)
    assert created.returncode == 0, created.stderr
    data = json.loads(created.stdout)
    assert set(data) == {"id", "key"}
    stored = database.execute_sql("SELECT key_hash FROM api_keys WHERE id = %s", (data["id"],)).fetchone()[0]
    assert stored == hash_key(data["key"]) and data["key"] not in stored
    url = api_server.url + "/v1/runs"
    assert httpx.get(url, headers=bearer(data["key"]), timeout=60).status_code == 200
    listed = _kickoff(["apikeys", "list", "--json"], server_env)
    assert listed.returncode == 0 and data["key"] not in listed.stdout
    [row] = json.loads(listed.stdout)["keys"]
    assert row["id"] == data["id"] and row["scope"] == "read" and row["revoked_at"] is None
    revoked = _kickoff(["apikeys", "revoke", data["id"]], server_env)
    assert revoked.returncode == 0, revoked.stderr
    wait_for(
        lambda: httpx.get(url, headers=bearer(data["key"]), timeout=60).status_code == 401,
        timeout=60,
        what="the revoked key to be refused",
    )
    unknown = _kickoff(["apikeys", "revoke", "00000000-0000-4000-8000-000000000009"], server_env)
    assert unknown.returncode == 2
    bad_scope = _kickoff(["apikeys", "create", "--name", "x", "--scope", "root"], server_env)
    assert bad_scope.returncode == 2


def test_create_limits_a_key_to_leagues(server_env, db):
    args = [
        "apikeys",
        "create",
        "--name",
        "l1",
        "--scope",
        "admin",
        "--league",
        "L1",
        "--league",
        "L2",
        "--json",
    ]
    created = _kickoff(args, server_env)
    assert created.returncode == 0, created.stderr
    listed = _kickoff(["apikeys", "list", "--json"], server_env)
    [row] = json.loads(listed.stdout)["keys"]
    assert row["scope"] == "admin" and row["leagues"] == ["L1", "L2"]
    table = _kickoff(["apikeys", "list"], server_env).stdout
    assert "L1,L2" in table and "leagues" in table
