"""A real worker with DRAMATIQ_PROMETHEUS counts what its verification set aside on its metrics port."""

from __future__ import annotations

from datetime import timedelta

from config.clock import utcnow
from publisher.results import action_state, report_result, verify_results
from publisher.triggers import trigger_lineup
from tests.publisher.helpers import lineup
from tests.waiting import wait_for
from tests.worker_metrics import enqueue_default, metrics_worker

DAY = 86400.0


def test_the_workers_verification_counts_a_late_result_on_its_metrics_port(
    test_env, settings, publisher, pub_settings, tmp_path
):
    tracking_id = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings).tracking_id
    verify_results(
        result_timeout_seconds=DAY, now=utcnow() + timedelta(seconds=DAY + 1)
    )  # failed as unreported
    assert report_result(tracking_id, outcome="succeeded")["late"] is True
    with metrics_worker(test_env, tmp_path=tmp_path) as worker:
        enqueue_default(settings, "verify_action_results")
        wait_for(
            lambda: action_state(tracking_id)["verification"]["status"] != "reported",
            timeout=90,
            what="the worker's verification pass",
        )
        samples: dict[tuple[str, str], float] = {}

        def counted() -> bool:
            for family in worker.families() or ():
                for s in family.samples:
                    if s.name == "kickoff_items_set_aside_total":
                        samples[(s.labels["loop"], s.labels["kind"])] = s.value
            return bool(samples)

        wait_for(counted, timeout=90, what="kickoff_items_set_aside_total on the worker's metrics port")
        assert samples == {("action_verification", "late"): 1.0}
        assert action_state(tracking_id)["verification"]["late"] is True
