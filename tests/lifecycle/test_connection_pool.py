"""A worker process keeps and reuses its PostgreSQL connections: one pool per process, with a cap."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import peewee
import psycopg2
import pytest

from config.errors import DatabaseUnavailable
from lifecycle.runtime import ListenerServices
from models.coordination import CoordinationStore
from models.db import (
    PooledKickoffDatabase,
    database,
    database_errors,
    init_database,
    pool_size,
    release_connection,
)
from tests import intervals
from tests.lifecycle.helpers import start
from tests.racing import on_own_thread
from tests.waiting import wait_for


def _backend_pid() -> int:
    try:
        return int(database.execute_sql("SELECT pg_backend_pid()").fetchone()[0])
    finally:
        database.close()


def _pool() -> PooledKickoffDatabase:
    assert isinstance(database.obj, PooledKickoffDatabase)
    return database.obj


def test_threads_that_close_after_each_step_share_the_pools_connections(lsettings, rebind):
    init_database(lsettings.database_url, pool_max_connections=2)
    with ThreadPoolExecutor(max_workers=8) as pool:
        pids = set(pool.map(lambda _: _backend_pid(), range(200)))
    assert 1 <= len(pids) <= 2
    assert _pool().in_use() == 0 and _pool().idle() == len(pids)


def test_a_thread_waits_for_a_connection_another_thread_hands_back(lsettings, rebind):
    init_database(lsettings.database_url, pool_max_connections=1, connect_timeout_seconds=30)
    held = database.execute_sql("SELECT pg_backend_pid()").fetchone()[0]  # this thread holds the only one
    released = threading.Event()
    got: list[tuple[int, bool]] = []  # (backend pid, whether the release came first)
    waiter = threading.Thread(target=lambda: got.append((_backend_pid(), released.is_set())))
    waiter.start()
    wait_for(lambda: _pool().full_takes >= 1, what="the second thread to find the pool full")
    assert waiter.is_alive() and not got  # blocked in the pool, not failed
    released.set()
    database.close()
    waiter.join(30)
    assert got == [(held, True)]


def test_a_thread_finding_every_connection_held_fails_after_the_connect_timeout(lsettings, rebind):
    init_database(lsettings.database_url, pool_max_connections=1, connect_timeout_seconds=1)
    database.execute_sql("SELECT 1")  # this thread holds the only one
    errors: list[BaseException] = []

    def other() -> None:
        try:
            with database_errors():
                database.execute_sql("SELECT 1")
        except DatabaseUnavailable as exc:
            errors.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(30)
    assert len(errors) == 1 and "DATABASE_POOL_MAX_CONNECTIONS" in str(errors[0])


def _terminate(url: str, pid: int) -> None:
    admin = psycopg2.connect(url)
    try:
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
    finally:
        admin.close()


def test_a_pooled_connection_the_server_ended_is_checked_and_replaced_before_use(lsettings, rebind):
    init_database(lsettings.database_url, pool_max_connections=1)
    first = _backend_pid()
    _terminate(lsettings.database_url, first)
    assert _backend_pid() != first  # no failed statement: the take saw it was gone


def test_the_connection_of_a_thread_that_ended_without_handing_it_back_is_reclaimed(lsettings, rebind):
    init_database(lsettings.database_url, pool_max_connections=1, connect_timeout_seconds=30)
    taken: list[int] = []
    ended = threading.Thread(
        target=lambda: taken.append(database.execute_sql("SELECT pg_backend_pid()").fetchone()[0])
    )
    ended.start()
    ended.join(30)
    assert taken and _pool().in_use() == 1  # the thread ended holding the only connection

    pid = _backend_pid()  # waits for no one: the ended thread's place is freed

    assert pid != taken[0] and _pool().full_takes == 1 and _pool().in_use() == 0


def _ended_thread_holding_a_connection() -> None:
    ended = threading.Thread(target=lambda: database.execute_sql("SELECT 1"))
    ended.start()
    ended.join(30)


def _pid_in_thread() -> object:
    """The backend pid another thread's connection gets, or the error it raised."""
    return on_own_thread(_backend_pid, limit=30)[0]


def test_an_idle_live_threads_older_connection_is_replaced_on_its_next_statement(lsettings, rebind):
    init_database(lsettings.database_url, pool_max_connections=2, connect_timeout_seconds=5)
    held = database.execute_sql("SELECT pg_backend_pid()").fetchone()[0]  # taken before the ended one's
    _ended_thread_holding_a_connection()

    other = _pid_in_thread()  # the pool was full: both older connections were closed

    assert isinstance(other, int)
    assert database.execute_sql("SELECT pg_backend_pid()").fetchone()[0] != held  # no error, a fresh one
    database.close()


def test_a_live_thread_in_a_transaction_keeps_its_connection(lsettings, rebind):
    init_database(lsettings.database_url, pool_max_connections=2, connect_timeout_seconds=1)
    with database.atomic():
        held = database.execute_sql("SELECT pg_backend_pid()").fetchone()[0]
        _ended_thread_holding_a_connection()

        other = _pid_in_thread()  # nothing may be reclaimed: it waits its second, then fails

        assert isinstance(other, peewee.OperationalError) and "DATABASE_POOL_MAX_CONNECTIONS" in str(other)
        assert database.execute_sql("SELECT pg_backend_pid()").fetchone()[0] == held
    database.close()


def test_a_live_thread_idle_after_a_committed_transaction_does_not_block_the_reclaim(lsettings, rebind):
    # peewee sends COMMIT past execute_sql: the pool judges the connection by libpq's own state
    init_database(lsettings.database_url, pool_max_connections=2, connect_timeout_seconds=1)
    with database.atomic():
        database.execute_sql("SELECT 1")
    _ended_thread_holding_a_connection()

    other = _pid_in_thread()  # the ended thread's place (and this idle one's) are freed

    assert isinstance(other, int)
    database.execute_sql("SELECT 1")  # this thread's next statement runs on a fresh connection
    database.close()


def test_a_transaction_begun_before_its_first_statement_keeps_its_connection(lsettings, rebind):
    # BEGIN also goes past execute_sql: between atomic() and the first statement the connection is in use
    init_database(lsettings.database_url, pool_max_connections=2, connect_timeout_seconds=1)
    database.execute_sql("SELECT 1")  # this thread holds a connection taken before the ended one's
    with database.atomic():
        _ended_thread_holding_a_connection()

        other = _pid_in_thread()  # nothing may be reclaimed: it waits its second, then fails

        assert isinstance(other, peewee.OperationalError) and "DATABASE_POOL_MAX_CONNECTIONS" in str(other)
        assert database.execute_sql("SELECT 1").fetchone() == (1,)  # the transaction's connection is intact
    database.close()


def test_a_connection_is_closed_once_older_than_its_max_age(lsettings, rebind):
    init_database(lsettings.database_url, pool_max_connections=1, pool_max_age_seconds=1)
    first = _backend_pid()
    wait_for(lambda: _backend_pid() != first, what="the old connection is replaced")


def test_the_pool_of_a_worker_is_its_listener_database_slots_plus_two_and_at_least_ten_unless_set():
    assert pool_size(pool_max_connections=None, listener_db_concurrency=16) == 18
    assert pool_size(pool_max_connections=None, listener_db_concurrency=4) == 10
    assert pool_size(pool_max_connections=3, listener_db_concurrency=8) == 3
    assert pool_size(pool_max_connections=0, listener_db_concurrency=8) == 0


def test_many_listener_starts_open_no_more_connections_than_the_pool(
    lsettings, redis_client, runner, make_match, rebind
):
    init_database(lsettings.database_url, pool_max_connections=3, connect_timeout_seconds=30)
    matches = [make_match() for _ in range(30)]
    database.close()
    overrides = {"listener_test_duration_seconds": 0.2}
    # Sixteen runs share three connections: a heartbeat may wait seconds for one, so the start lock
    # gets a realistic stale threshold (the in-process 1.5 s expired under CI's load, failing a start).
    settings = lsettings.model_copy(
        update=intervals.fields(
            "listen_subprocess",
            "listener_heartbeat_interval_seconds",
            "listener_heartbeat_stale_seconds",
            "listener_lock_loss_grace_seconds",
        )
    )
    coordination = CoordinationStore.from_settings(settings, client=redis_client)
    services = ListenerServices(settings=settings, coordination=coordination)
    ctx = {"settings": settings, "coordination": coordination, "services": services}
    try:
        futures = [runner(start, m, overrides=overrides, **ctx) for m in matches]
        results = [f.result(timeout=120) for f in futures]
    finally:
        services.shutdown_all()
        services.close()

    assert all(r.exit_code == 0 and r.record_id for r in results), results
    # Without a pool each start opens two connections (its guards, its row) and closes them.
    assert 1 <= _pool().connections_opened <= 3


@pytest.mark.services  # its own Redis client on the run's Redis
def test_many_threads_using_one_redis_client_at_once_wait_for_a_connection_instead_of_failing(lsettings):
    from models.coordination import REDIS_MAX_CONNECTIONS, connect_redis

    client = connect_redis(lsettings.redis_url)
    threads = REDIS_MAX_CONNECTIONS * 4  # a graceful shutdown of a thousand listeners, in small
    empty = f"{lsettings.redis_key_prefix}never-pushed"  # each BLPOP holds its connection 0.1 s

    with ThreadPoolExecutor(max_workers=threads) as pool:
        replies = list(pool.map(lambda _: client.blpop([empty], timeout=0.1), range(threads)))

    assert replies == [None] * threads
    assert client.connection_pool.max_connections == REDIS_MAX_CONNECTIONS
    client.close()


def test_release_connection_hands_the_connection_back_outside_a_transaction_only(lsettings, rebind):
    init_database(lsettings.database_url, pool_max_connections=2)
    release_connection()  # no connection held: nothing to do
    with database.atomic():
        database.execute_sql("SELECT 1")
        release_connection()  # inside the transaction: its owner hands it back
        assert _pool().in_use() == 1
    release_connection()
    release_connection()
    assert _pool().in_use() == 0 and database.is_closed()
