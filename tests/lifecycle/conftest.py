"""Lifecycle fixtures: short intervals, the scripted body, in-process services and worker subprocesses."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cli.processes import ChildProcess, dramatiq_worker_argv
from config.settings import MatchListenerEnvironment
from lifecycle.dispatch import StartMessage
from lifecycle.runtime import ListenerServices
from models.coordination import CoordinationStore
from models.db import database, init_database
from tests import intervals
from tests.waiting import wait_for

#: The scripted body at short intervals (tests/intervals.py ``in_process``): the real code, fast.
SHORT = {"LISTENER_BODY": "listener.testing:ScriptedListener", **intervals.env("in_process")}


@pytest.fixture(autouse=True)
def lifecycle_env(monkeypatch: pytest.MonkeyPatch, test_env: dict[str, str]) -> dict[str, str]:
    """This run's settings plus short intervals in os.environ (Layer A of every resolved run).

    APP_ENV is staging here: these tests start and restart live matches, which develop (test
    clones only, ``AppEnv.automatic_is_test``) would not; develop's rule has tests of its own.
    """
    env = {**test_env, **SHORT, "APP_ENV": "staging"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture(autouse=True)
def actors_bound(lifecycle_env: dict[str, str]) -> None:
    """The actor runtime of this process runs with this run's settings and short intervals."""
    import actors  # noqa: F401  configures the runtime from the environment on first import
    from actors import actor_runtime

    actor_runtime.configure(MatchListenerEnvironment(_env_file=None))


@pytest.fixture
def rebind(db, lsettings):
    """Re-bind the proxy after the test to the defaults the other tests use."""
    yield
    if not database.is_closed():
        database.close()
    init_database(lsettings.database_url)


@pytest.fixture
def lsettings(lifecycle_env: dict[str, str]) -> MatchListenerEnvironment:
    """MatchListenerEnvironment of the test run with short intervals (no .env file)."""
    return MatchListenerEnvironment(_env_file=None)


@pytest.fixture
def lcoordination(lsettings: MatchListenerEnvironment, redis_client: Any) -> CoordinationStore:
    return CoordinationStore.from_settings(lsettings, client=redis_client)


@pytest.fixture
def services(
    lsettings: MatchListenerEnvironment, lcoordination: CoordinationStore
) -> Iterator[ListenerServices]:
    """Fresh process-wide listener services for one test (threads stopped afterwards)."""
    svc = ListenerServices(settings=lsettings, coordination=lcoordination)
    yield svc
    svc.shutdown_all()
    time.sleep(0.05)
    svc.close()


#: Default lease and stale threshold; a heartbeat every 5 s (tests/intervals.py ``real_worker``).
REAL_WORKER_DEFAULTS = intervals.env("real_worker")
#: ``ctx`` for tests whose listeners run on real worker subprocesses: ``@REAL_WORKER_CTX`` on the test.
REAL_WORKER_CTX = pytest.mark.parametrize("ctx", ["real_worker"], indirect=True)


@pytest.fixture
def ctx(
    request: pytest.FixtureRequest,
    lsettings: MatchListenerEnvironment,
    lcoordination: CoordinationStore,
    redis_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Any]:
    """The keyword arguments of a lifecycle call: ``start(match, **ctx)``; its intervals by parameter.

    ``in_process`` (unless parametrized): settings, coordination store and listener services of this process
    at short intervals. ``real_worker`` (``REAL_WORKER_CTX``): settings and coordination store at
    REAL_WORKER_DEFAULTS, also set in os.environ (for CLIs run in process), and no services: the
    listeners run in the workers.
    """
    row = getattr(request, "param", "in_process")
    if row == "in_process":
        return {
            "settings": lsettings,
            "coordination": lcoordination,
            "services": request.getfixturevalue("services"),
        }
    if row != "real_worker":
        raise ValueError(f"ctx: no intervals {row!r} (in_process or real_worker)")
    for key, value in REAL_WORKER_DEFAULTS.items():
        monkeypatch.setenv(key, value)
    settings = MatchListenerEnvironment(_env_file=None)
    return {
        "settings": settings,
        "coordination": CoordinationStore.from_settings(settings, client=redis_client),
    }


class Outbox:
    """A recording sender (``send``; ``extend`` is the batch sender): the start messages dispatch
    would send to the broker."""

    def __init__(self) -> None:
        self.messages: list[StartMessage] = []
        self._mu = threading.Lock()

    def __call__(self, message: StartMessage) -> None:
        with self._mu:
            self.messages.append(message)

    def extend(self, messages: list[StartMessage]) -> None:
        """The batch sender (``send_batch``): records every message of the batch."""
        with self._mu:
            self.messages.extend(messages)

    @property
    def match_ids(self) -> list[str]:
        return [m.match_id for m in self.messages]


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


@pytest.fixture
def runner(services: ListenerServices) -> Iterator[Callable[..., Future]]:
    """Run a callable in a background thread (a listener run lasts until stopped).

    At teardown every listener still running is stopped first, so a failed test cannot hang.
    """
    pool = ThreadPoolExecutor(max_workers=16)

    def submit(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        def call() -> Any:
            try:
                return fn(*args, **kwargs)
            finally:
                if not database.is_closed():
                    database.close()

        return pool.submit(call)

    yield submit
    services.shutdown_all()
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def srsim(db) -> Iterator[Callable[..., Any]]:
    """``srsim(games, **kwargs)``: an in-process srsim (its schedule and league APIs), stopped after."""
    from srsim.server import SimServer

    servers: list[SimServer] = []

    def start(games: list[Any], **kwargs: Any) -> SimServer:
        server = SimServer(games, **{"heartbeat_seconds": 1.0, **kwargs}).start_background()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def pointed_at(
    actor_runtime: Callable[[MatchListenerEnvironment], object],
) -> Callable[..., None]:
    """Point the actor runtime's settings at an srsim server; keywords update more."""
    from actors.actor_runtime import current

    def point(server: Any, **update: Any) -> None:
        actor_runtime(
            current().settings.model_copy(update={"sportradar_base_url": server.base_url, **update})
        )

    return point


class WorkerProcess(ChildProcess):
    """A real ``dramatiq actors`` worker subprocess on this run's broker (BROKER_URL of its env)."""

    def __init__(self, env: dict[str, str], log: Path, *, queues: tuple[str, ...], threads: int) -> None:
        cmd = dramatiq_worker_argv(*queues, threads=threads, shutdown_timeout_ms=10000)
        super().__init__(cmd, env=env, log=log, cwd=Path(__file__).resolve().parents[2])

    def wait_ready(self, timeout: float = 30.0) -> None:
        wait_for(lambda: "ready for action" in self.output() or not self.running(), timeout=timeout)
        assert self.running(), self.output()

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM to the master (it forwards it to its worker process once) and wait."""
        return super().terminate(timeout=timeout)


#: ``worker_broker`` on RabbitMQ: marked ``amqp`` (its vhost is asked for inside the fixture).
ON_AMQP = pytest.param("amqp", marks=pytest.mark.amqp)
#: The Dramatiq brokers real-worker tests run on: ``BOTH_BROKERS`` parametrizes ``worker_broker``.
BOTH_BROKERS = pytest.mark.parametrize("worker_broker", ["redis", ON_AMQP], indirect=True)
#: Dramatiq's queues (and their delay and dead-letter queues) in the run's RabbitMQ vhost.
DRAMATIQ_AMQP_QUEUES = tuple(f"{q}{s}" for q in ("default", "match_listeners") for s in ("", ".DQ", ".XQ"))


@pytest.fixture
def worker_broker(
    request: pytest.FixtureRequest,
    lifecycle_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    actor_runtime: Callable[[MatchListenerEnvironment], object],
) -> Iterator[str]:
    """The broker real workers and this process's senders use: ``redis`` unless parametrized.

    ``amqp`` points BROKER_URL at this run's RabbitMQ vhost (workers, the actor runtime, every
    settings object built afterwards) and deletes Dramatiq's queues there after the test.
    """
    kind = getattr(request, "param", "redis")
    if kind == "redis":
        yield kind
        return
    url = request.getfixturevalue("amqp_vhost")
    lifecycle_env["BROKER_URL"] = url
    monkeypatch.setenv("BROKER_URL", url)
    actor_runtime(MatchListenerEnvironment(_env_file=None))
    yield kind
    from publisher.amqp import AmqpPublisher

    with AmqpPublisher(url=url) as admin:
        for queue in DRAMATIQ_AMQP_QUEUES:
            admin.delete_queue(queue)


@pytest.fixture
def start_worker(
    subprocess_env: dict[str, str], lifecycle_env: dict[str, str], tmp_path: Path, worker_broker: str
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker subprocesses (killed at teardown); keyword ``env`` adds settings."""
    workers: list[WorkerProcess] = []

    def start(
        *, queues: tuple[str, ...] = ("match_listeners",), threads: int = 4, env: dict[str, str] | None = None
    ) -> WorkerProcess:
        full = {**subprocess_env, **lifecycle_env, **(env or {})}
        worker = WorkerProcess(full, tmp_path / f"worker{len(workers)}.log", queues=queues, threads=threads)
        workers.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in workers:
        worker.close()


@pytest.fixture
def kick(db, redis_client, lifecycle_env):
    """Run the kickoff CLI in process on this run's services: ``kick(*args, code=0)``."""
    from click.testing import CliRunner

    from cli.main import cli

    runner = CliRunner()

    def run(*args: str, code: int = 0):
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result

    return run


@pytest.fixture
def broker_queues(lifecycle_env):
    """``broker_queues(queue)``: messages waiting on a Dramatiq queue of this run's namespace.

    The namespace is emptied before (an earlier test's starts may still wait there) and after.
    """
    from models.coordination import connect_redis

    client = connect_redis(lifecycle_env["BROKER_URL"])
    ns = lifecycle_env["BROKER_NAMESPACE"]

    def empty() -> None:
        for key in client.scan_iter(match=f"{ns}:*"):
            client.delete(key)

    empty()
    yield lambda q: client.hlen(f"{ns}:{q}.msgs")
    empty()


@pytest.fixture
def send_start(lifecycle_env: dict[str, str]) -> Iterator[Callable[..., None]]:
    """The actors' real start sender (this run's broker); the namespace's messages are removed after."""
    from actors.listeners import send_start as sender
    from models.coordination import connect_redis

    yield sender
    if lifecycle_env["BROKER_URL"].startswith("redis"):  # RabbitMQ: worker_broker deletes the queues
        client = connect_redis(lifecycle_env["BROKER_URL"])
        for key in client.scan_iter(match=f"{lifecycle_env['BROKER_NAMESPACE']}:*"):
            client.delete(key)


@pytest.fixture
def static_feed() -> Iterator[Callable[[dict[str, Any]], str]]:
    """``static_feed({path: document})``: a real HTTP server answering each path with its JSON document
    (404 otherwise), for documents srsim cannot produce (malformed entries); returns its base URL."""
    from tests.static_feed import base_url_of, serve_documents

    servers: list[Any] = []

    def serve(documents: dict[str, Any]) -> str:
        server = serve_documents(documents)
        servers.append(server)
        return base_url_of(server)

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def deploy(repo_root, subprocess_env, lifecycle_env, tmp_path, amqp_vhost):
    """``deploy(restart_cmd)``: run deploy/staging-deploy.sh on this run's services; its stdout."""
    from publisher.amqp import AmqpPublisher
    from publisher.queues import OUTBOX_QUEUES

    with AmqpPublisher(url=amqp_vhost) as admin:
        admin.declare_durable(list(OUTBOX_QUEUES))  # so the deploy's `kickoff check` passes
    env_file = tmp_path / "kickoff.env"
    env_file.write_text("".join(f"{k}='{v}'\n" for k, v in {**lifecycle_env, **REAL_WORKER_DEFAULTS}.items()))

    def run(restart_cmd: str) -> str:
        env = {
            **subprocess_env,
            "KICKOFF_ENV_FILE": str(env_file),
            "KICKOFF": str(Path(sys.executable).parent / "kickoff"),
            "RESTART_CMD": restart_cmd,
        }
        done = subprocess.run(
            [str(repo_root / "deploy/staging-deploy.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    return run


class CountingStarts:
    """A match_listeners consumer's inner consumer that always has a start: counts its fetches (a gated
    DrainableConsumer fetches none)."""

    def __init__(self) -> None:
        self.fetches = 0

    def __next__(self) -> str:
        self.fetches += 1
        return "start"


@pytest.fixture
def starts_ungated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No draining pause, and after the test no start gate and starts taken again (actors.draining)."""
    from actors import draining

    monkeypatch.setattr(draining, "DRAINING_IDLE_SECONDS", 0.0)
    yield
    draining.gate_starts_on(None)
    draining.resume_taking_starts()
