"""The database roles: the owner runs migrations, the app's role may only INSERT and SELECT the audit log.

``kickoff db migrate`` connects as the owner (DATABASE_OWNER_URL, else DATABASE_URL). When the
app's DATABASE_URL names another user, ``ensure_app_role`` creates or updates that role (LOGIN,
its password from DATABASE_URL, no superuser, no CREATEROLE, no CREATEDB, no BYPASSRLS) and
grants it what the processes need: every table read and written, except ``audit_log`` (SELECT,
and INSERT of every column but ``id`` and ``at``: no back-dated entry) and ``audit_policy``
(SELECT), the sequences, and EXECUTE on ``prune_audit_log`` (a SECURITY DEFINER function of the
owner with a floor). It also writes the retention floor (AUDIT_RETENTION_DAYS) to
``audit_policy``. ``audit_rewrite_privileges`` is what ``kickoff check`` asks: which ways of
rewriting the audit log the app's own connection still has.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg2
from psycopg2 import sql

from config.errors import MigrationError
from models.boundary import translate_database_errors
from models.db import connect_kwargs_from_url, database

logger = logging.getLogger(__name__)

#: The tables the app's role may only read (and, for the audit log, append to).
AUDIT_TABLE = "audit_log"
POLICY_TABLE = "audit_policy"
#: yoyo's own tables: the app's role reads them (``kickoff db status``, ``kickoff check``), never writes.
AUDIT_INSERT_COLUMNS = (
    "who_key_id",
    "who",
    "action",
    "target_kind",
    "target_id",
    "reason",
    "before",
    "after",
    "request_id",
)
YOYO_TABLES = ("_yoyo_migration", "_yoyo_log", "_yoyo_version", "yoyo_lock")


@dataclass(frozen=True)
class RoleReport:
    """What ``ensure_app_role`` did: the role's name and whether it was created (else updated)."""

    role: str
    created: bool


def app_role_of(app_url: str, owner_url: str) -> str | None:
    """The app's role to manage: DATABASE_URL's user when it differs from the owner's, else None."""
    _, app = connect_kwargs_from_url(app_url)
    _, owner = connect_kwargs_from_url(owner_url)
    user = app.get("user")
    return str(user) if user and user != owner.get("user") else None


def ensure_app_role(*, owner_url: str, app_url: str, retention_floor_days: int) -> RoleReport | None:
    """Create or update the app's role of ``app_url`` with its grants, as the owner of ``owner_url``;
    write the retention floor. None (only the floor written) when both URLs name one user."""
    name, owner = connect_kwargs_from_url(owner_url)
    _, app = connect_kwargs_from_url(app_url)
    role = app_role_of(app_url, owner_url)
    try:
        conn = psycopg2.connect(dbname=name, connect_timeout=10, **owner)
    except psycopg2.OperationalError as exc:
        raise MigrationError(f"cannot connect as the owner to set up roles: {exc}".strip()) from exc
    try:
        with conn, conn.cursor() as cur:
            cur.execute("UPDATE audit_policy SET retention_floor_days = %s", (retention_floor_days,))
            if role is None:
                return None
            created = _create_or_update(cur, role, app.get("password"))
            _grant(cur, role, name)
        logger.info("database role %s %s with the app's grants", role, "created" if created else "updated")
        return RoleReport(role=role, created=created)
    except psycopg2.Error as exc:
        raise MigrationError(f"cannot set up the app's role {role}: {exc}".strip()) from exc
    finally:
        conn.close()


def _create_or_update(cur: object, role: str, password: object) -> bool:
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))  # type: ignore[attr-defined]
    exists = cur.fetchone() is not None  # type: ignore[attr-defined]
    verb = "ALTER" if exists else "CREATE"
    options = sql.SQL("LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOREPLICATION")
    statement = sql.SQL("{} ROLE {} WITH {}").format(sql.SQL(verb), sql.Identifier(role), options)
    if password:
        statement = statement + sql.SQL(" PASSWORD {}").format(sql.Literal(str(password)))
    try:
        cur.execute(statement)  # type: ignore[attr-defined]
    except psycopg2.errors.DuplicateObject:  # another migrate created it first
        return False
    return not exists


def _grant(cur: object, role: str, database_name: str) -> None:
    ident = sql.Identifier(role)
    statements = [
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database_name), ident),
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}").format(ident),
        sql.SQL("GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {}").format(ident),
        sql.SQL("REVOKE ALL ON {} FROM {}").format(sql.Identifier(AUDIT_TABLE), ident),
        sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(AUDIT_TABLE), ident),
        # every column but id and at (the sequence and now()): an entry cannot be back-dated
        sql.SQL("GRANT INSERT ({}) ON {} TO {}").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in AUDIT_INSERT_COLUMNS),
            sql.Identifier(AUDIT_TABLE),
            ident,
        ),
        sql.SQL("REVOKE ALL ON {} FROM {}").format(sql.Identifier(POLICY_TABLE), ident),
        sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(POLICY_TABLE), ident),
        sql.SQL("REVOKE ALL ON FUNCTION prune_audit_log(INTEGER, TEXT) FROM PUBLIC"),
        sql.SQL("GRANT EXECUTE ON FUNCTION prune_audit_log(INTEGER, TEXT) TO {}").format(ident),
    ]
    for table in YOYO_TABLES:
        statements.append(
            sql.SQL(
                "DO $$ BEGIN IF to_regclass({}) IS NOT NULL THEN EXECUTE {}; EXECUTE {}; END IF; END $$"
            ).format(
                sql.Literal(table),
                sql.Literal(
                    sql.SQL("REVOKE ALL ON {} FROM {}").format(sql.Identifier(table), ident).as_string(cur)
                ),
                sql.Literal(
                    sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(table), ident).as_string(cur)
                ),
            )
        )
    for statement in statements:
        cur.execute(statement)  # type: ignore[attr-defined]


#: Each way of rewriting the audit log, as the privilege PostgreSQL checks.
REWRITES = ("UPDATE", "DELETE", "TRUNCATE", "TRIGGER")


@translate_database_errors
def audit_rewrite_privileges() -> list[str]:
    """The ways this connection's role could rewrite ``audit_log`` (empty: append-only for it).

    Owning the table (or being a superuser) allows all of them, trigger changes included.
    """
    row = database.execute_sql(
        "SELECT r.rolsuper, pg_get_userbyid(c.relowner) = current_user"
        " FROM pg_roles r, pg_class c WHERE r.rolname = current_user AND c.oid = 'audit_log'::regclass"
    ).fetchone()
    if row is None:
        return []
    superuser, owner = row
    if superuser:
        return ["superuser"]
    if owner:
        return ["owner"]
    found = []
    for privilege in REWRITES:
        (has,) = database.execute_sql(
            "SELECT has_table_privilege(current_user, 'audit_log', %s)", (privilege,)
        ).fetchone()
        if has:
            found.append(privilege)
    return found
