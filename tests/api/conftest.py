"""API fixtures: a real `kickoff serve` on a free port against this run's services, keys per scope."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.keys import Scope, create_key
from harness.ports import free_port
from models.coordination import connect_redis
from tests.static_feed import base_url_of, serve_documents
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
START_DEADLINE_SECONDS = 90.0

# Short publisher intervals for the server (as tests/publisher's pub_settings).
SERVER_ENV = {
    "OUTBOX_IMMEDIATE_GRACE_SECONDS": "0",
    "ACTIVITY_PARENT_READ_TIMEOUT_SECONDS": "0.3",
    "AMQP_CONFIRM_TIMEOUT_SECONDS": "5",
    "LOG_LEVEL": "INFO",
    "METRICS_CACHE_SECONDS": "0",  # a test reads /metrics right after it changed the state
    "HISTORY_FLUSH_SECONDS": "0.5",  # a test reads the history of what it just did
}


@dataclass
class Server:
    """A running `kickoff serve` subprocess."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_server(
    env: dict[str, str], log_path: Path, *, tries: int = 3, args: tuple[str, ...] = ()
) -> Server:
    """Start `kickoff serve [ARGS]` on a free port; another free port if one was taken meanwhile."""
    for attempt in range(1, tries + 1):
        try:
            return _start_server(env, log_path, args)
        except ServerExited:
            if attempt == tries or "address already in use" not in log_path.read_text().lower():
                raise
    raise AssertionError("unreachable")


class ServerExited(AssertionError):
    """`kickoff serve` exited before it answered."""


def _start_server(env: dict[str, str], log_path: Path, args: tuple[str, ...] = ()) -> Server:
    port = free_port()
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if process.poll() is not None:
            raise ServerExited(f"kickoff serve exited {process.returncode}: {log_path.read_text()}")
        try:
            return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, timeout=START_DEADLINE_SECONDS, what="kickoff serve to answer /healthz")
    return Server(url=url, process=process, log_path=log_path)


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=30)


@pytest.fixture(scope="session")
def feed_documents() -> Iterator[dict[str, Any]]:
    """The server's feed (SPORTRADAR_BASE_URL): a local HTTP server answering each path of this dict
    with its JSON document (404 otherwise); a test adds a play-by-play under its path."""
    documents: dict[str, Any] = {}
    server = serve_documents(documents, name="api-feed")
    documents["base_url"] = base_url_of(server)
    yield documents
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def server_env(
    test_env: dict[str, str], migrated_database: str, amqp_vhost: str, feed_documents: dict[str, Any]
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(test_env)
    env.update(SERVER_ENV)
    env["SPORTRADAR_BASE_URL"] = feed_documents["base_url"]
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextlib.contextmanager
def serving(env: dict[str, str], log_dir: Path, args: tuple[str, ...] = ()) -> Iterator[Server]:
    """`kickoff serve ARGS` for the ``with`` block (log in ``log_dir``); then stopped, namespace emptied."""
    server = start_server(env, log_dir / "serve.log", args=args)
    yield server
    stop_server(server)
    _delete_broker_namespace(env)


@pytest.fixture(scope="session")
def api_server(server_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One `kickoff serve` for the session."""
    with serving(server_env, tmp_path_factory.mktemp("api")) as server:
        yield server


def _delete_broker_namespace(env: dict[str, str]) -> None:
    """Remove the start messages the listener routes enqueued under this run's Dramatiq namespace."""
    client = connect_redis(env["BROKER_URL"])
    keys = list(client.scan_iter(match=f"{env['BROKER_NAMESPACE']}*", count=1000))
    if keys:
        client.delete(*keys)


def key_per_scope(name: str) -> dict[str, str]:
    """One live key per scope named ``{name}-{scope}`` (deleted with the tables after the test)."""
    return {scope.value: create_key(name=f"{name}-{scope.value}", scope=scope)[1] for scope in Scope}


@pytest.fixture
def keys(db: str) -> dict[str, str]:
    """One live key per scope."""
    return key_per_scope("test")


@pytest.fixture
def api(api_server: Server, keys: dict[str, str], fresh_queues: None) -> Iterator[httpx.Client]:
    """An HTTP client of the session server with an operator key."""
    with httpx.Client(
        base_url=api_server.url, headers={"Authorization": f"Bearer {keys['operator']}"}, timeout=30.0
    ) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


DOWN_AMQP_URL = "amqp://guest:guest@127.0.0.1:1/%2F"


@pytest.fixture(scope="session")
def broken_server(server_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A second `kickoff serve` whose RabbitMQ does not answer and whose /metrics needs a key."""
    env = {
        **server_env,
        "AMQP_URL": DOWN_AMQP_URL,
        "AMQP_CONNECT_TIMEOUT_SECONDS": "1",
        "API_METRICS_REQUIRE_KEY": "true",
    }
    with serving(env, tmp_path_factory.mktemp("api-broken")) as server:
        yield server


def answers_of_each_kind(api: Any, api_server: Any) -> list[httpx.Response]:
    """One answer of each kind the API gives, in order: 200, 202, 422, 415, 404, 401 (no credentials)."""
    from tests.api.test_triggers import LINEUP

    return [
        api.get("/healthz"),
        api.post("/v1/trigger/lineup", json=LINEUP),
        api.post("/v1/trigger/lineup", json={}),
        api.post("/v1/trigger/lineup", content=b"x", headers={"Content-Type": "text/plain"}),
        api.get("/no-such-route"),
        httpx.get(api_server.url + "/v1/runs", timeout=60),
    ]
