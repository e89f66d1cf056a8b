"""Every kickoff PostgreSQL connection has a connect timeout, TCP keepalives and a statement timeout."""

from __future__ import annotations

import pytest

from config.errors import DatabaseUnavailable
from models.db import database, database_errors, init_database


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
