"""Schema migrations (yoyo, plain SQL files in models/migrations): create the database, apply."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg2
from psycopg2 import errorcodes, sql
from yoyo import get_backend, read_migrations

from config.errors import DatabaseUnavailable, MigrationError
from config.settings import mask_url
from models.db import connect_kwargs_from_url

logger = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


@dataclass(frozen=True)
class MigrationReport:
    """What ``migrate`` did: whether it created the database and which migrations it applied."""

    database: str
    created_database: bool
    applied: tuple[str, ...]
    already_applied: tuple[str, ...]


def _unavailable(url: str, exc: Exception) -> DatabaseUnavailable:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DatabaseUnavailable(
        service="PostgreSQL", setting="DATABASE_URL", address=mask_url(url), reason=reason
    )


def ensure_database(url: str) -> bool:
    """Create the database named in ``url`` if it does not exist; True when created."""
    name, kwargs = connect_kwargs_from_url(url)
    try:
        conn = psycopg2.connect(dbname="postgres", connect_timeout=5, **kwargs)
    except psycopg2.OperationalError as exc:
        raise _unavailable(url, exc) from exc
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone():
                return False
            try:
                cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            except psycopg2.Error as exc:
                if exc.pgcode in (errorcodes.DUPLICATE_DATABASE, errorcodes.UNIQUE_VIOLATION):
                    return False  # another migrate created it first
                raise MigrationError(f"cannot create database {name!r}: {exc}") from exc
            logger.info("created database %s", name)
            return True
    finally:
        conn.close()


def drop_database(url: str) -> None:
    """Drop the database named in ``url`` (tests); connections to it are terminated first."""
    name, kwargs = connect_kwargs_from_url(url)
    conn = psycopg2.connect(dbname="postgres", connect_timeout=5, **kwargs)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    finally:
        conn.close()


@contextlib.contextmanager
def _yoyo(url: str, *, failing: str) -> Iterator[tuple[Any, Any]]:
    """The yoyo backend of the database at ``url`` and the migration files, closed at the end.

    psycopg2 errors become DatabaseUnavailable (cannot connect) or MigrationError, whose message
    starts with ``failing`` and the database name.
    """
    name, _ = connect_kwargs_from_url(url)
    try:
        backend = get_backend(url)
    except psycopg2.OperationalError as exc:
        raise _unavailable(url, exc) from exc
    try:
        yield backend, read_migrations(str(MIGRATIONS_DIR))
    except psycopg2.OperationalError as exc:
        raise _unavailable(url, exc) from exc
    except psycopg2.Error as exc:
        raise MigrationError(f"{failing} {name}: {exc}") from exc
    finally:
        backend.connection.close()


def migrate(url: str) -> MigrationReport:
    """Create the database if needed and apply every pending migration (idempotent)."""
    created = ensure_database(url)
    name, _ = connect_kwargs_from_url(url)
    with _yoyo(url, failing="migration failed on") as (backend, migrations), backend.lock():
        pending = backend.to_apply(migrations)
        applied = tuple(m.id for m in pending)
        done = tuple(m.id for m in migrations if m.id not in applied)
        backend.apply_migrations(pending)
    return MigrationReport(database=name, created_database=created, applied=applied, already_applied=done)


@dataclass(frozen=True)
class MigrationStatus:
    """Which migrations the database at DATABASE_URL has applied and which are pending."""

    database: str
    applied: tuple[str, ...]
    pending: tuple[str, ...]


def migration_status(url: str) -> MigrationStatus:
    """Read applied and pending migrations (nothing is changed; the database must exist)."""
    name, _ = connect_kwargs_from_url(url)
    with _yoyo(url, failing="cannot read the migrations of") as (backend, migrations):
        pending = {m.id for m in backend.to_apply(migrations)}
    ids = [m.id for m in migrations]
    return MigrationStatus(
        database=name,
        applied=tuple(i for i in ids if i not in pending),
        pending=tuple(i for i in ids if i in pending),
    )
