"""Shared fixtures: a private PostgreSQL database, Redis key prefix and Dramatiq namespace per run.

Every pytest session migrates its own database (``kickoff_test_<hex>``) and uses its own Redis
prefix, so parallel runs on one machine do not see each other. Tables are truncated and the
prefix's keys deleted after each test that used them. Under pytest-xdist (``scripts/test`` runs
the suite on several workers) each worker is a session of its own: it imports this module, so
it draws its own ``RUN_ID`` and has its own database, prefix, namespace and vhost.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import peewee
import pytest

from config import clock
from config.settings import MatchListenerEnvironment
from models.coordination import CoordinationStore, connect_redis
from models.db import database, init_database
from models.migrate import drop_database, migrate
from publisher.amqp import AmqpPublisher, read_messages
from publisher.queues import ALL_QUEUES, OUTBOX_QUEUES

RUN_ID = uuid.uuid4().hex[:10]
ADMIN_URL = os.environ.get("KICKOFF_TEST_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432")
#: RabbitMQ without a vhost: each run adds its own (``amqp_vhost``).
AMQP_SERVER_URL = os.environ.get("KICKOFF_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672")


@pytest.fixture(scope="session")
def test_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment variables of this test run (also given to subprocess workers and CLIs)."""
    data_dir = tmp_path_factory.mktemp("data")
    return {
        "DATABASE_URL": f"{ADMIN_URL}/kickoff_test_{RUN_ID}",
        "REDIS_URL": os.environ.get("KICKOFF_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
        "REDIS_KEY_PREFIX": f"kickofftest:{RUN_ID}:",
        "BROKER_URL": os.environ.get("KICKOFF_TEST_BROKER_URL", "redis://127.0.0.1:6379/2"),
        "BROKER_NAMESPACE": f"kickofftest-{RUN_ID}",
        "AMQP_URL": f"{AMQP_SERVER_URL}/kickoff_test_{RUN_ID}",
        "APP_ENV": "develop",
        "DATA_DIR": str(data_dir),
        "SPORTRADAR_API_KEY": "test-api-key-never-printed",
    }


@pytest.fixture
def subprocess_env(test_env: dict[str, str]) -> dict[str, str]:
    """os.environ plus this run's settings, for kickoff subprocesses."""
    env = dict(os.environ)
    env.update(test_env)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="session")
def settings(test_env: dict[str, str]) -> MatchListenerEnvironment:
    """MatchListenerEnvironment of this run, ignoring any developer .env."""
    kwargs = {k.lower(): v for k, v in test_env.items()}
    return MatchListenerEnvironment(_env_file=None, **kwargs)


@pytest.fixture(scope="session")
def migrated_database(settings: MatchListenerEnvironment) -> Iterator[str]:
    """Create and migrate this run's database once; drop it at the end."""
    migrate(settings.database_url)
    init_database(settings.database_url)
    yield settings.database_url
    database.close()
    drop_database(settings.database_url)


@pytest.fixture(scope="session")
def app_role_url(migrated_database: str, settings: MatchListenerEnvironment) -> Iterator[str]:
    """DATABASE_URL of this run's app role (``kickoff_test_<run>_app``: roles are cluster-wide, so one
    per run and xdist worker), set up as `kickoff db migrate` does; dropped at the end."""
    import psycopg2
    from psycopg2 import sql

    from models.db import connect_kwargs_from_url
    from models.roles import ensure_app_role

    role = f"kickoff_test_{RUN_ID}_app"
    parts = urlsplit(migrated_database)
    url = urlunsplit(
        parts._replace(netloc=f"{role}:{uuid.uuid4().hex}@{parts.hostname}:{parts.port or 5432}")
    )
    ensure_app_role(
        owner_url=migrated_database, app_url=url, retention_floor_days=settings.audit_retention_days
    )
    yield url
    name, kwargs = connect_kwargs_from_url(migrated_database)
    for dbname in (name, "postgres"):
        conn = psycopg2.connect(dbname=dbname, connect_timeout=5, **kwargs)
        conn.autocommit = True
        with conn.cursor() as cur:
            if dbname == name:
                cur.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            else:
                cur.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        conn.close()


def _truncate_all() -> None:
    """Empty every table a test wrote to and restart every sequence it used (``RESTART IDENTITY``).

    Only the tables holding rows are emptied (one query of ``EXISTS`` probes), by ``DELETE`` with
    foreign-key triggers off (``session_replication_role``): a ``TRUNCATE ... CASCADE`` of every
    table costs about 80 ms a test, this about 5 ms.
    """
    rows = database.execute_sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
        "AND tablename NOT LIKE '\\_yoyo%%' AND tablename NOT LIKE 'yoyo%%'"
        " AND tablename <> 'audit_policy'"  # the migration's row (the retention floor) stays
    ).fetchall()
    if not rows:
        return
    probe = " UNION ALL ".join(f"SELECT '{name}' WHERE EXISTS (SELECT 1 FROM \"{name}\")" for (name,) in rows)
    written = [r[0] for r in database.execute_sql(probe).fetchall()]
    used = database.execute_sql(
        "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL"
    ).fetchall()
    if not written and not used:
        return
    try:
        with database.atomic():
            database.execute_sql("SET LOCAL session_replication_role = replica")  # needs a superuser
            for name in written:
                database.execute_sql(f'DELETE FROM "{name}"')
    except peewee.DatabaseError:  # not a superuser: truncate what holds rows (and what refers to it)
        if written:
            names = ", ".join(f'"{name}"' for name in written)
            database.execute_sql(f"TRUNCATE {names} CASCADE")
    for (sequence,) in used:
        database.execute_sql(f'ALTER SEQUENCE "{sequence}" RESTART')


@pytest.fixture
def db(migrated_database: str) -> Iterator[str]:
    """The migrated test database, emptied after the test."""
    yield migrated_database
    database.close()
    database.connect(reuse_if_open=True)
    _truncate_all()
    database.close()


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def amqp_vhost(settings: MatchListenerEnvironment) -> Iterator[str]:
    """This run's own RabbitMQ vhost (created with rabbitmqctl, deleted at the end); its AMQP URL."""
    vhost = f"kickoff_test_{RUN_ID}"
    _rabbitmqctl("add_vhost", vhost)
    _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    yield settings.amqp_url
    _rabbitmqctl("delete_vhost", vhost)


@pytest.fixture
def fresh_queues(amqp_vhost: str) -> Iterator[None]:
    """Delete every kickoff queue, then declare the outbox queues durable (like `kickoff amqp setup`)."""
    with AmqpPublisher(url=amqp_vhost) as admin:
        for queue in ALL_QUEUES:
            admin.delete_queue(queue)
        admin.declare_durable(OUTBOX_QUEUES)
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Delete the queues the test made refuse every publish (``tests.publisher.helpers.reject_all``).

    First, before the fixtures are torn down: after the last test the run's vhost (``amqp_vhost``,
    session scope) is deleted with them, and a delete then fails on a vhost that is gone."""
    from tests.publisher.helpers import REJECTING

    while REJECTING:
        url, queue = REJECTING.pop()
        with AmqpPublisher(url=url) as admin:
            admin.delete_queue(queue)


@pytest.fixture
def read_queue(amqp_vhost: str) -> Callable[[str], list[tuple[dict[str, Any], Any]]]:
    """Read (and remove) every message in a queue: (body, properties) pairs."""

    def read(queue: str) -> list[tuple[dict[str, Any], Any]]:
        return read_messages(url=amqp_vhost, queue=queue)

    return read


@pytest.fixture
def actor_runtime(
    monkeypatch: pytest.MonkeyPatch, test_env: dict[str, str], settings: MatchListenerEnvironment
) -> Iterator[Callable[[MatchListenerEnvironment], object]]:
    """``actor_runtime(settings)``: this process's actors run with ``settings`` until the test ends.

    The one place tests point actors elsewhere (``actors.actor_runtime.configure``); the runtime of
    this run's settings is configured afterwards. Not the runtime found before: a test module
    that imports ``actors`` at collection configures it from the shell's environment, and
    restoring that would point the model layer at the developer's database.
    """
    for key, value in test_env.items():
        monkeypatch.setenv(key, value)  # importing actors configures the runtime from the environment
    import actors  # noqa: F401
    from actors import actor_runtime

    yield actor_runtime.configure
    actor_runtime.configure(settings)


@pytest.fixture
def redis_client(settings: MatchListenerEnvironment):
    """A Redis client; every key under this run's prefix is deleted after the test."""
    client = connect_redis(settings.redis_url)
    yield client
    keys = list(client.scan_iter(match=f"{settings.redis_key_prefix}*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture
def coordination(settings: MatchListenerEnvironment, redis_client) -> CoordinationStore:
    """CoordinationStore under this run's key prefix."""
    return CoordinationStore.from_settings(settings, client=redis_client)


class FrozenClock:
    """A settable clock for tests: ``now`` is fixed until moved."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


@pytest.fixture
def frozen_clock() -> Iterator[FrozenClock]:
    """Freeze kickoff's clock at 2024-05-21 18:00 UTC; restored after the test."""
    fc = FrozenClock(datetime(2024, 5, 21, 18, 0, tzinfo=UTC))
    clock.set_clock(fc)
    yield fc
    clock.set_clock(None)


@pytest.fixture
def make_match(db: str) -> Callable[..., object]:
    """Create a Match (and its league) with sensible defaults; keyword arguments override."""
    from models import League, Match

    def make(league: str = "nfl", *, league_enabled: bool = True, **fields: object) -> Match:
        lg, _ = League.get_or_create(name=league, defaults={"enabled": league_enabled})
        fields.setdefault("sr_id", f"sr:match:{uuid.uuid4()}")
        fields.setdefault("scheduled", clock.utcnow())
        return Match.create(league=lg, **fields)

    return make


@pytest.fixture
def host_network() -> Iterator[Any]:
    """A ``harness.hosts.HostNetwork`` (test hosts on network namespaces), removed after the test.

    Skipped only when not root (namespaces and iptables need it); a missing ``ip`` or
    ``iptables`` as root fails the test (scripts/test installs them).
    """
    from harness.hosts import HostNetwork

    if os.geteuid() != 0:
        pytest.skip("test hosts need root (network namespaces, veth pairs, iptables)")
    with HostNetwork() as network:
        yield network


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture
def traced() -> Iterator[Any]:
    """Tracing on in this process, every ended span in the returned exporter (the SDK's in-memory
    one); off again afterwards."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from config import tracing

    exporter = InMemorySpanExporter()
    tracing.configure_tracing(service="kickoff-test", exporter=exporter, environ={})
    yield exporter
    tracing.disable_tracing()


#: Fixtures that reach PostgreSQL, Redis or RabbitMQ (directly or through the processes they start).
SERVICE_FIXTURES = frozenset({"migrated_database", "amqp_vhost", "redis_client", "subprocess_env"})
#: Marks of tests that need a service (or start processes that do) or an installed tool: never in
#: the unit tier.
SERVICE_MARKS = frozenset({"services", "e2e", "outage", "browser", "amqp", "tools", "partition", "chaos"})


#: Marks of the long tests (minutes of real processes), longest kind first.
LONG_MARKS = ("chaos", "partition", "outage", "e2e", "browser")


def run_order(item: pytest.Item) -> int:
    """The rank of ``item``: the index of its first ``LONG_MARKS`` mark, else after them all."""
    ranks = (rank for rank, name in enumerate(LONG_MARKS) if item.get_closest_marker(name))
    return next(ranks, len(LONG_MARKS))


def deal(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` reordered so that xdist's ``--dist worksteal`` gives each worker its share of the
    long tests first: it splits the collection into ``workers`` consecutive slices (the sizes
    below), each worker runs its slice from the front, and an idle one steals the back half of
    the longest queue. The long tests are dealt round robin, longest kind first, to the slices'
    fronts; the rest fill the slices in their order (each module's tests stay together)."""
    long = sorted((item for item in items if run_order(item) < len(LONG_MARKS)), key=run_order)
    rest = [item for item in items if run_order(item) == len(LONG_MARKS)]
    sizes, left = [], len(items)
    for slices_left in range(workers, 0, -1):
        sizes.append(left // slices_left)
        left -= sizes[-1]
    slices: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for index, item in enumerate(long):
        slices[index % workers].append(item)
    if any(len(slice_) > size for slice_, size in zip(slices, sizes, strict=True)):
        return long + rest  # more long tests than a slice holds: longest first, the stealing evens out
    others = iter(rest)
    for slice_, size in zip(slices, sizes, strict=True):
        slice_.extend(itertools.islice(others, size - len(slice_)))
    return [item for slice_ in slices for item in slice_]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``unit`` every test that needs no service (``pytest -m unit`` is the fast tier); in a
    worker of a parallel run (pytest-xdist), deal the long tests evenly (``deal``)."""
    for item in items:
        needs_service = SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        marked_service = any(item.get_closest_marker(name) for name in SERVICE_MARKS)
        if not needs_service and not marked_service:
            item.add_marker(pytest.mark.unit)
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    if workers > 1:
        items[:] = deal(items, workers)
