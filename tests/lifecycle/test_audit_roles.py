"""Issue 35 item 3: connected as the app's role, the audit log is append-only against the app itself."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg2
import pytest

from models.audit import Actor, audit_entries, record_audit
from models.db import connect_kwargs_from_url, database

TAMPERING = [
    pytest.param(
        "SET kickoff.audit_retention = 'on'; DELETE FROM audit_log", id="delete-with-the-bypass-set"
    ),
    pytest.param("DELETE FROM audit_log", id="delete"),
    pytest.param("UPDATE audit_log SET who = 'someone else'", id="update"),
    pytest.param("TRUNCATE audit_log", id="truncate"),
    pytest.param("ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only", id="disable-trigger"),
    pytest.param("DROP TRIGGER audit_log_append_only ON audit_log", id="drop-trigger"),
    pytest.param(
        "CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql"
        " AS $$ BEGIN RETURN OLD; END $$",
        id="replace-trigger-function",
    ),
    pytest.param("SELECT prune_audit_log(0, 'me')", id="prune-everything"),
    pytest.param("SELECT prune_audit_log(1, 'me')", id="prune-below-the-floor"),
    pytest.param("UPDATE audit_policy SET retention_floor_days = 1", id="lower-the-floor"),
    pytest.param(
        "INSERT INTO audit_log (at, who, action, target_kind) VALUES ('2001-01-01', 'x', 'y', 'z')",
        id="insert-back-dated",
    ),
    pytest.param("ALTER FUNCTION prune_audit_log(INTEGER, TEXT) SECURITY INVOKER", id="alter-prune"),
    pytest.param("ALTER TABLE audit_log OWNER TO CURRENT_USER", id="take-ownership"),
]


@pytest.fixture
def as_app(app_role_url: str, db: str) -> Iterator[psycopg2.extensions.connection]:
    name, kwargs = connect_kwargs_from_url(app_role_url)
    conn = psycopg2.connect(dbname=name, connect_timeout=10, **kwargs)
    yield conn
    conn.close()


@pytest.mark.parametrize("statement", TAMPERING)
def test_the_app_role_cannot_rewrite_the_audit_log(as_app, statement):
    record_audit(actor=Actor.cli(), action="run.cancel", target_kind="run", target_id="kept")
    with pytest.raises(psycopg2.Error) as info, as_app, as_app.cursor() as cur:
        cur.execute(statement)
    assert info.value.pgcode in ("42501", "P0001"), info.value  # insufficient_privilege (or raised)
    assert [e.target_id for e in audit_entries()] == ["kept"]


def test_the_app_role_appends_reads_and_prunes_at_the_floor_with_a_record(as_app):
    with as_app, as_app.cursor() as cur:
        cur.execute("INSERT INTO audit_log (who, action, target_kind) VALUES ('app', 'run.cancel', 'run')")
        cur.execute("SELECT count(*) FROM audit_log")
        assert cur.fetchone()[0] == 1
        cur.execute("SELECT prune_audit_log(400, 'app@test')")
        assert cur.fetchone()[0] == 0
    [prune, _] = audit_entries()
    assert (prune.action, prune.who, prune.after) == ("audit.prune", "app@test", {"days": 400, "deleted": 0})


def test_kickoff_check_fails_for_the_owner_and_passes_for_the_app_role(
    kick, rebind, app_role_url, monkeypatch
):
    checks = {c["name"]: c for c in json.loads(kick("check", "--json", code=1).output)["checks"]}
    assert checks["audit log"]["status"] == "FAIL" and "superuser" in checks["audit log"]["detail"]
    database.close()
    monkeypatch.setenv("DATABASE_URL", app_role_url)
    checks = {c["name"]: c for c in json.loads(kick("check", "--json", code=1).output)["checks"]}
    assert checks["audit log"]["status"] == "ok", checks["audit log"]
    assert checks["migrations"]["status"] == "ok", checks["migrations"]


def test_migrate_sets_up_the_app_role_again_and_says_so(kick, app_role_url, monkeypatch, lifecycle_env):
    monkeypatch.setenv("DATABASE_OWNER_URL", lifecycle_env["DATABASE_URL"])
    monkeypatch.setenv("DATABASE_URL", app_role_url)
    out = json.loads(kick("db", "migrate", "--json").output)
    assert out["applied"] == [] and out["app_role"].endswith("_app")
