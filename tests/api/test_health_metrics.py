"""/healthz, /readyz (503 naming what does not answer) and /metrics parsed by prometheus_client."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lifecycle.takeover import WORKER_DIED
from models.listener_record import MatchListenerRecord
from models.match import Match
from tests.api.conftest import bearer
from tests.api.test_triggers import LINEUP


def test_healthz_and_readyz(api_server, fresh_queues):
    assert httpx.get(api_server.url + "/healthz", timeout=60).json() == {"status": "ok"}
    ready = httpx.get(api_server.url + "/readyz", timeout=60)
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "ready" and set(ready.json()["services"].values()) == {"ok"}


def test_readyz_names_the_service_that_does_not_answer(broken_server, db):
    ready = httpx.get(broken_server.url + "/readyz", timeout=60)
    assert ready.status_code == 503
    body = ready.json()
    assert body["failing"] == ["RabbitMQ"]
    expected = {"PostgreSQL": "ok", "Redis": "ok", "Dramatiq broker": "ok", "RabbitMQ": "failing"}
    assert body["services"] == expected
    assert "://" not in ready.text and "127.0.0.1" not in ready.text
    log = broken_server.log()
    assert "RabbitMQ is failing" in log and "AMQP_URL=amqp://guest:***@" in log
    assert httpx.get(broken_server.url + "/healthz", timeout=60).status_code == 200


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_text_parses_and_reports_shared_state(api, api_server, make_match):
    match = make_match(status="inprogress")
    MatchListenerRecord.create(
        match=match, exit_code=11, ended_at=match.scheduled, gaps=2, events_backfilled=7
    )
    MatchListenerRecord.create(match=match, gaps=1, events_unrecovered=1)  # open: Running
    taken = make_match(status="inprogress")  # a run took it over after its worker died
    MatchListenerRecord.create(match=taken, exit_code=14, ended_at=taken.scheduled, exit_reason=WORKER_DIED)
    MatchListenerRecord.create(match=taken, takeover_path="death_seen", takeover_seconds=0.8)
    Match.update(archive_verification={"ok": False}).where(Match.id == match.id).execute()
    make_match(status="closed", archive_verification={"ok": True})
    assert api.post("/v1/trigger/lineup", json=LINEUP).status_code == 202
    assert api.post("/v1/trigger/lineup", json={}).status_code == 422
    assert api.post("/v1/runs", json={"job": "noop", "params": {}}).status_code == 202
    r = httpx.get(api_server.url + "/metrics", timeout=60)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = _samples(r.text)
    assert samples[("kickoff_listeners", (("badge", "Running"),))] == 2
    assert samples[("kickoff_listener_starts_total", ())] == 4
    assert samples[("kickoff_listener_failures_total", ())] == 2  # the 11 and the 14 of a dead worker
    death = (("path", "death_seen"),)
    assert samples[("kickoff_listener_takeover_seconds_count", death)] == 1
    assert samples[("kickoff_listener_takeover_seconds_sum", death)] == 0.8
    assert samples[("kickoff_listener_takeover_seconds_bucket", (("le", "0.5"), ("path", "death_seen")))] == 0
    assert samples[("kickoff_listener_takeover_seconds_bucket", (("le", "1.0"), ("path", "death_seen")))] == 1
    for path in ("lease_lapsed", "handoff"):
        assert samples[("kickoff_listener_takeover_seconds_count", (("path", path),))] == 0
    assert ("kickoff_listener_oldest_heartbeat_age_seconds", ()) in samples
    assert samples[("kickoff_listener_exhausted_matches", ())] == 0
    assert samples[("kickoff_listener_gaps_total", ())] == 3
    assert samples[("kickoff_events_backfilled_total", ())] == 7
    assert samples[("kickoff_events_unrecovered_total", ())] == 1
    assert samples[("kickoff_archive_verifications_failed", ())] == 1
    assert samples[("kickoff_outbox_dead", ())] == 0
    assert ("kickoff_outbox_oldest_pending_age_seconds", ()) in samples
    assert (
        samples[("kickoff_runs", (("status", "queued"),))]
        + samples[("kickoff_runs", (("status", "running"),))]
        >= 1
    )
    assert ("kickoff_launcher_slots_in_use", ()) in samples
    for source in ("listeners", "outbox", "runs"):
        assert samples[("kickoff_metrics_source_up", (("source", source),))] == 1
    lineup = (("route", "/v1/trigger/lineup"), ("status", "202"))
    assert samples[("kickoff_trigger_request_seconds_count", lineup)] >= 1
    refused = (("route", "/v1/trigger/lineup"), ("status", "422"))
    assert samples[("kickoff_trigger_request_seconds_count", refused)] >= 1
    assert ("kickoff_dispatch_tick_seconds_count", ()) in samples


def test_metrics_never_contain_a_key(api_server, keys):
    httpx.get(api_server.url + "/v1/runs", headers=bearer(keys["read"]), timeout=60)
    text = httpx.get(api_server.url + "/metrics", timeout=60).text
    assert all(key not in text for key in keys.values())
