"""DRAMATIQ_PROMETHEUS=true: a real worker exposes Dramatiq's own metrics on dramatiq_prom_port."""

from __future__ import annotations

import os
import signal

import dramatiq
import httpx
from prometheus_client.parser import text_string_to_metric_families

from actors.broker import QUEUE_DEFAULT, build_broker
from cli.processes import ChildProcess, dramatiq_worker_argv
from tests.api.conftest import REPO, free_port
from tests.waiting import wait_for


def test_a_worker_with_dramatiq_prometheus_serves_its_metrics(
    test_env, settings, migrated_database, redis_client, tmp_path
):
    port = free_port()
    env = {
        **os.environ,
        **test_env,
        "DRAMATIQ_PROMETHEUS": "true",
        "dramatiq_prom_host": "127.0.0.1",
        "dramatiq_prom_port": str(port),
        "dramatiq_prom_db": str(tmp_path / "prom"),
    }
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
    finally:
        worker.signal_group(signal.SIGTERM)
        worker.proc.wait(timeout=60)
        worker.close()


def test_a_row_a_workers_sweep_sets_aside_is_counted_on_its_exposition_server(
    test_env, settings, migrated_database, redis_client, make_match, barriers, tmp_path
):
    from tests.lifecycle.helpers import poisoned_and_good_runs

    poisoned_and_good_runs(make_match, barriers, redis_client, good=1)
    port = free_port()
    env = {
        **os.environ,
        **test_env,
        "DRAMATIQ_PROMETHEUS": "true",
        "dramatiq_prom_host": "127.0.0.1",
        "dramatiq_prom_port": str(port),
        "dramatiq_prom_db": str(tmp_path / "prom"),
    }
    worker = ChildProcess(
        dramatiq_worker_argv("default", threads=1), env=env, log=tmp_path / "w.log", cwd=REPO
    )
    try:
        sweep = dramatiq.Message(
            queue_name=QUEUE_DEFAULT, actor_name="sweep_stale_match_listeners", args=(), kwargs={}, options={}
        )
        build_broker(settings).enqueue(sweep)
        wanted = ("kickoff_lifecycle_items_set_aside_total", {"step": "release_start_lock"})

        def counted() -> bool:
            assert worker.running(), worker.output()
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/", timeout=2).text
            except httpx.HTTPError:
                return False
            return any(
                (s.name, s.labels) == wanted and s.value == 1
                for family in text_string_to_metric_families(text)
                for s in family.samples
            )

        wait_for(counted, timeout=90, what="the set-aside row counted on the worker's exposition server")
    finally:
        worker.signal_group(signal.SIGTERM)
        worker.proc.wait(timeout=60)
        worker.close()
