"""GET /v1/actions/{id} shows a result reported after its action was settled as late, beside the action."""

from __future__ import annotations

from datetime import timedelta

import httpx

from config.clock import utcnow
from publisher.results import verify_results
from tests.api.conftest import bearer
from tests.api.test_triggers import LINEUP

DAY = 86400.0


def test_a_late_result_is_accepted_and_shown_beside_the_failed_action(api, keys, api_server):
    tracking_id = api.post("/v1/trigger/lineup", json=LINEUP).json()["tracking_id"]  # the operator's
    assert verify_results(
        result_timeout_seconds=DAY, now=utcnow() + timedelta(seconds=DAY + 1)
    ).unreported == [tracking_id]
    read, operator = bearer(keys["read"]), bearer(keys["operator"])
    url = f"{api_server.url}/v1/actions/{tracking_id}"
    body = {"outcome": "succeeded", "details": {"team_id": "7"}, "reported_by": "espn-worker"}
    r = httpx.post(f"{url}/result", json=body, headers=operator, timeout=60)
    assert r.status_code == 202, r.text
    assert r.json()["late"] is True
    assert verify_results(result_timeout_seconds=DAY).late == [tracking_id]
    state = httpx.get(url, headers=read, timeout=60).json()
    assert state["status"] == "failed" and state["error"].startswith("no result reported within")
    assert state["verification"]["late"] is True
    assert state["verification"]["status"] == "verified" and state["verification"]["outcome"] == "succeeded"
    metrics = httpx.get(f"{api_server.url}/metrics", timeout=60).text
    assert 'kickoff_action_results{state="late"} 1.0' in metrics
    assert 'kickoff_action_results{state="set_aside"} 0.0' in metrics
