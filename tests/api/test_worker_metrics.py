"""DRAMATIQ_PROMETHEUS=true: a real worker exposes Dramatiq's own metrics on dramatiq_prom_port."""

from __future__ import annotations

import signal

import dramatiq
import httpx
from prometheus_client.parser import text_string_to_metric_families

from actors.broker import QUEUE_DEFAULT, build_broker
from cli.processes import ChildProcess, dramatiq_worker_argv
from tests.api.conftest import REPO
from tests.ports import free_port
from tests.waiting import wait_for
from tests.worker_metrics import prometheus_worker_env


def _listening_hosts(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp* write them) of the sockets listening on ``port``."""
    hosts = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in list(fh)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.rpartition(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    hosts.add(address)
    return hosts


def test_a_worker_with_dramatiq_prometheus_serves_its_metrics_on_loopback_only(
    test_env, settings, migrated_database, redis_client, tmp_path
):
    port = free_port()
    env = prometheus_worker_env(test_env, port=port, prom_dir=tmp_path / "prom", host=None)
    log = tmp_path / "worker.log"
    worker = ChildProcess(
        dramatiq_worker_argv("default", threads=1),
        env=env,
        log=log,
        cwd=REPO,
    )
    try:
        sender = build_broker(settings)  # the worker's broker: this run's namespace
        sweep = dramatiq.Message(
            queue_name=QUEUE_DEFAULT,
            actor_name="sweep_stale_match_listeners",
            args=(),
            kwargs={},
            options={},
        )
        sender.enqueue(sweep)
        found: list[str] = []

        def scraped() -> bool:
            assert worker.running(), worker.output()
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/", timeout=2).text
            except httpx.HTTPError:
                return False
            found[:] = [f.name for f in text_string_to_metric_families(text)]
            return any(name.startswith("dramatiq_") for name in found)

        wait_for(scraped, timeout=90, what="the worker's Prometheus exposition server")
        assert {"dramatiq_messages", "dramatiq_message_durations_milliseconds"} & set(found), found
        # No dramatiq_prom_host in the environment: 127.0.0.1, not Dramatiq's 0.0.0.0.
        assert _listening_hosts(port) == {"0100007F"}
    finally:
        worker.signal_group(signal.SIGTERM)
        worker.proc.wait(timeout=60)
        worker.close()


def test_a_worker_serves_the_count_of_matches_its_dispatch_set_aside(
    test_env, settings, migrated_database, redis_client, make_match, tmp_path
):
    make_match(status="inprogress", listener_start_settings={"no_such_setting": 1})
    port = free_port()
    env = prometheus_worker_env(test_env, port=port, prom_dir=tmp_path / "prom")
    worker = ChildProcess(
        dramatiq_worker_argv("default", threads=1), env=env, log=tmp_path / "w.log", cwd=REPO
    )
    try:
        sender = build_broker(settings)
        sender.enqueue(
            dramatiq.Message(
                queue_name=QUEUE_DEFAULT,
                actor_name="dispatch_upcoming_match_listeners",
                args=(),
                kwargs={"within_minutes": 0},
                options={},
            )
        )
        counted: list[float] = []

        def scraped() -> bool:
            assert worker.running(), worker.output()
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/", timeout=2).text
            except httpx.HTTPError:
                return False
            counted[:] = [
                s.value
                for f in text_string_to_metric_families(text)
                for s in f.samples
                if s.name == "kickoff_items_set_aside_total" and s.labels.get("loop") == "dispatch"
            ]
            return bool(counted)

        wait_for(scraped, timeout=90, what="the worker's count of set-aside matches")
        assert sum(counted) == 1
        assert "set aside: unknown listener setting(s)" in worker.output()
    finally:
        worker.signal_group(signal.SIGTERM)
        worker.proc.wait(timeout=60)
        worker.close()


def test_the_exposition_address_is_loopback_unless_dramatiq_prom_host_names_one(monkeypatch):
    from actors.prometheus import exposition_address

    monkeypatch.delenv("dramatiq_prom_host", raising=False)
    assert exposition_address()[0] == "127.0.0.1"
    monkeypatch.setenv("dramatiq_prom_host", "0.0.0.0")
    assert exposition_address()[0] == "0.0.0.0"
