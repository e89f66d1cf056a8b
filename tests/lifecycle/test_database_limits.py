"""Every kickoff PostgreSQL connection has a connect timeout, TCP keepalives, a statement timeout and a
client-side deadline for each statement."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from config.errors import DatabaseUnavailable
from harness.faultproxy import FaultProxy
from models.boundary import connection, transaction
from models.db import client_deadline_seconds, database, database_errors, init_database


@contextmanager
def _through_a_proxy(
    lsettings, *, pool: int, connect_timeout_seconds: float, statement_timeout_seconds: float
) -> Iterator[FaultProxy]:
    """The database reached through a FaultProxy the test breaks (init_database with these limits)."""
    with FaultProxy(("127.0.0.1", 5432)) as proxy:
        init_database(
            proxy.url_via(lsettings.database_url),
            connect_timeout_seconds=connect_timeout_seconds,
            statement_timeout_seconds=statement_timeout_seconds,
            pool_max_connections=pool,
        )
        yield proxy


def test_a_statement_running_longer_than_the_statement_timeout_fails_instead_of_hanging(lsettings, rebind):
    init_database(lsettings.database_url, statement_timeout_seconds=0.2)
    with pytest.raises(DatabaseUnavailable, match="statement timeout"), database_errors():
        database.execute_sql("SELECT pg_sleep(5)")


def test_connections_carry_connect_timeout_keepalives_and_keep_the_urls_own_options(lsettings, rebind):
    url = lsettings.database_url + "?options=-c%20application_name%3Dkickoff_probe"
    init_database(url, connect_timeout_seconds=7, statement_timeout_seconds=30)
    params = database.connection().get_dsn_parameters()
    assert params["connect_timeout"] == "7" and params["keepalives"] == "1"
    shown = {
        name: database.execute_sql(f"SHOW {name}").fetchone()[0]
        for name in ("statement_timeout", "application_name")
    }
    assert shown == {"statement_timeout": "30s", "application_name": "kickoff_probe"}


@pytest.mark.parametrize("pool", [0, 4], ids=["plain", "pooled"])
@pytest.mark.parametrize("statement", ["SELECT 1", "COMMIT"])
def test_a_statement_on_a_black_holed_link_fails_at_its_client_deadline_instead_of_hanging(
    lsettings, rebind, pool, statement
):
    """The server never hears it, so its statement timeout cannot help; nor do keepalives (the
    link's TCP still answers). The client-side deadline shuts the connection: DatabaseUnavailable."""
    with _through_a_proxy(
        lsettings, pool=pool, connect_timeout_seconds=1, statement_timeout_seconds=1
    ) as proxy:
        deadline = client_deadline_seconds(connect_timeout_seconds=1, statement_timeout_seconds=1)
        with database_errors():
            database.execute_sql("SELECT 1")  # connected through the proxy
        started = time.monotonic()
        failed = pytest.raises(DatabaseUnavailable)
        with failed, database_errors(), database.atomic():
            database.execute_sql("SELECT 1")
            proxy.blackhole()
            if statement == "SELECT 1":
                database.execute_sql(statement)  # else the atomic block's COMMIT is the one that waits
        waited = time.monotonic() - started
        assert deadline <= waited < deadline + 5  # failed at its deadline, not at the heal
        proxy.forward()
        with database_errors():  # the broken connection was dropped: the next statement reconnects
            assert database.execute_sql("SELECT 2").fetchone() == (2,)
        database.close()


@pytest.mark.parametrize("pool", [0, 4], ids=["plain", "pooled"])
def test_postgresql_going_away_inside_a_connection_scope_is_database_unavailable_and_the_scope_reconnects(
    lsettings, rebind, pool
):
    """A listener's store calls run inside ``connection()`` scopes; a connection lost in one (a
    statement, a transaction's commit) is DatabaseUnavailable on its way out, never an error of the
    scope's own bookkeeping, and once PostgreSQL is back the same scope's next statement reconnects."""
    with _through_a_proxy(
        lsettings, pool=pool, connect_timeout_seconds=2, statement_timeout_seconds=5
    ) as proxy:
        with connection():
            with connection(), database_errors():  # a store call's own scope, nested
                assert database.execute_sql("SELECT 1").fetchone() == (1,)
            proxy.refuse()
            with pytest.raises(DatabaseUnavailable), connection(), database_errors():
                database.execute_sql("SELECT 1")
            with pytest.raises(DatabaseUnavailable), connection(), transaction():
                database.execute_sql("SELECT 1")
            proxy.forward()
            with connection(), transaction():
                assert database.execute_sql("SELECT 2").fetchone() == (2,)
            with database_errors():
                assert database.execute_sql("SELECT 3").fetchone() == (3,)
        assert database.is_closed()  # the outermost scope handed its connection back
        with pytest.raises(DatabaseUnavailable), connection():  # a scope opening while it is away
            proxy.refuse()
            database.execute_sql("SELECT 4")
        proxy.forward()
        with connection():
            assert database.execute_sql("SELECT 5").fetchone() == (5,)
