"""``kickoff check``: services, migrations, workers per queue, scheduler, queue depths, dead letters, feed."""

from __future__ import annotations

import http.server
import json
import threading
import time
from datetime import UTC, datetime

import pytest

from models.presence import presence_key
from tests.waiting import wait_for


@pytest.fixture
def feed(monkeypatch):
    """A tiny HTTP server standing in for the feed; SPORTRADAR_BASE_URL points at it."""

    class Quiet(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SPORTRADAR_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
    yield
    server.shutdown()


def by_name(output: str) -> dict[str, dict[str, str]]:
    doc = json.loads(output)
    return {c["name"]: c for c in doc["checks"]} | {"_ok": {"status": str(doc["ok"])}}


def test_check_names_every_missing_part_and_exits_1(kick, amqp_vhost, monkeypatch):
    kick("amqp", "setup")
    monkeypatch.setenv("SPORTRADAR_BASE_URL", "http://127.0.0.1:1")
    checks = by_name(kick("check", "--json", code=1).output)
    for name in ("PostgreSQL", "Redis", "Dramatiq broker", "RabbitMQ", "migrations", "queue default"):
        assert checks[name]["status"] == "ok", checks[name]
    assert checks["workers on default"]["status"] == "FAIL"
    assert "no worker alive" in checks["workers on match_listeners"]["detail"]
    assert checks["scheduler"]["status"] == "FAIL" and "kickoff scheduler" in checks["scheduler"]["detail"]
    assert "SPORTRADAR_BASE_URL=http://127.0.0.1:1" in checks["feed"]["detail"]
    text = kick("check", code=1).output
    assert "FAIL  scheduler: no tick" in text and "ok    PostgreSQL: at DATABASE_URL=" in text


def test_check_is_ok_with_a_worker_on_each_queue_a_recent_tick_and_the_feed(
    kick,
    amqp_vhost,
    feed,
    start_worker,
    lifecycle_env,
    lcoordination,
    broker_queues,
    app_role_url,
    rebind,
    monkeypatch,
):
    from models.coordination import connect_redis
    from models.db import database

    database.close()
    monkeypatch.setenv("DATABASE_URL", app_role_url)  # the app's role: the audit log is append-only for it
    kick("amqp", "setup")
    ns = lifecycle_env["BROKER_NAMESPACE"]
    broker = connect_redis(lifecycle_env["BROKER_URL"])
    worker = start_worker(queues=("default", "match_listeners"))
    wait_for(
        lambda: (
            broker.zcard(presence_key(ns, "default")) and broker.zcard(presence_key(ns, "match_listeners"))
        )
    )
    lcoordination.ticks.claim_tick("test", datetime.now(UTC), owner="x", ttl_seconds=300)
    broker.zadd(f"{ns}:default.XQ", {"dead-1": time.time() * 1000})
    checks = by_name(kick("check", "--json").output)
    assert checks["_ok"]["status"] == "True"
    assert (
        checks["workers on default"]["status"] == "ok" and "1 alive" in checks["workers on default"]["detail"]
    )
    assert checks["scheduler"]["status"] == "ok" and checks["feed"]["status"] == "ok"
    assert (
        checks["queue default"]["status"] == "warn" and "1 dead-lettered" in checks["queue default"]["detail"]
    )
    assert worker.terminate() == 0
    assert broker.zcard(presence_key(ns, "default")) == 0
    assert by_name(kick("check", "--json", code=1).output)["workers on default"]["status"] == "FAIL"


def test_check_services_only_is_what_a_deploy_runs_first(kick, amqp_vhost):
    kick("amqp", "setup")
    checks = by_name(kick("check", "--services", "--json").output)
    assert set(checks) == {"PostgreSQL", "Redis", "Dramatiq broker", "RabbitMQ", "_ok"}
