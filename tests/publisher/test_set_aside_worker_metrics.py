"""A real worker with DRAMATIQ_PROMETHEUS counts what its verification set aside on its metrics port."""

from __future__ import annotations

import signal
from datetime import timedelta

import dramatiq
import httpx
from prometheus_client.parser import text_string_to_metric_families

from actors.broker import QUEUE_DEFAULT, build_broker
from cli.processes import ChildProcess, dramatiq_worker_argv
from config.clock import utcnow
from publisher.results import action_state, report_result, verify_results
from publisher.triggers import trigger_lineup
from tests.api.conftest import REPO
from tests.ports import free_port
from tests.publisher.helpers import lineup
from tests.waiting import wait_for
from tests.worker_metrics import prometheus_worker_env

DAY = 86400.0


def test_the_workers_verification_counts_a_late_result_on_its_metrics_port(
    test_env, settings, publisher, pub_settings, tmp_path
):
    tracking_id = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings).tracking_id
    verify_results(
        result_timeout_seconds=DAY, now=utcnow() + timedelta(seconds=DAY + 1)
    )  # failed as unreported
    assert report_result(tracking_id, outcome="succeeded")["late"] is True
    port = free_port()
    env = prometheus_worker_env(test_env, port=port, prom_dir=tmp_path / "prom")
    worker = ChildProcess(
        dramatiq_worker_argv("default", threads=1), env=env, log=tmp_path / "w.log", cwd=REPO
    )
    try:
        build_broker(settings).enqueue(
            dramatiq.Message(
                queue_name=QUEUE_DEFAULT, actor_name="verify_action_results", args=(), kwargs={}, options={}
            )
        )
        wait_for(
            lambda: action_state(tracking_id)["verification"]["status"] != "reported",
            timeout=90,
            what="the worker's verification pass",
        )
        samples: dict[tuple[str, str], float] = {}

        def counted() -> bool:
            assert worker.running(), worker.output()
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/", timeout=2).text
            except httpx.HTTPError:
                return False
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    if s.name == "kickoff_items_set_aside_total":
                        samples[(s.labels["loop"], s.labels["kind"])] = s.value
            return bool(samples)

        wait_for(counted, timeout=90, what="kickoff_items_set_aside_total on the worker's metrics port")
        assert samples == {("action_verification", "late"): 1.0}
        assert action_state(tracking_id)["verification"]["late"] is True
    finally:
        worker.signal_group(signal.SIGTERM)
        worker.proc.wait(timeout=60)
        worker.close()
