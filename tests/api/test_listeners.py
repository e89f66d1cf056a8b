"""Listener routes over HTTP: board, match, start/stop/auto-dispatch, dispatch, sweep."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from models import Match
from models.audit import audit_entries
from models.db import database
from models.listener_record import MatchListenerRecord


def test_board_and_match(api, make_match, coordination):
    match = make_match(status="scheduled")
    board = api.get("/v1/listeners")
    assert board.status_code == 200 and board.json()["count"] == 0
    shown = api.get(f"/v1/matches/{match.id}")
    assert shown.status_code == 200
    assert shown.json()["id"] == str(match.id) and shown.json()["listener"]["badge"] == "-"
    assert api.get(f"/v1/matches/{uuid.uuid4()}").status_code == 404
    assert api.get("/v1/matches/sr:match:1").status_code == 404


def test_start_then_a_second_start_is_not_enqueued_unless_forced(api, make_match, coordination):
    match = make_match(status="scheduled")
    url = f"/v1/matches/{match.id}/start-listener"
    first = api.post(url)
    assert first.status_code == 202 and first.json()["enqueued"] is True
    assert coordination.barriers.is_pending(str(match.id))
    again = api.post(url, json={})
    assert again.status_code == 200 and again.json()["enqueued"] is False
    forced = api.post(
        url, json={"force": True, "reason": "drill", "overrides": {"listener_skip_processing": True}}
    )
    assert forced.status_code == 202 and forced.json()["force"] is True
    board = api.get("/v1/listeners", params={"match_id": str(match.id)}).json()
    assert board["matches"][0]["pending"] is True


def test_start_refuses_unknown_overrides_and_unknown_matches(api, make_match, coordination):
    match = make_match(status="scheduled")
    bad = api.post(f"/v1/matches/{match.id}/start-listener", json={"overrides": {"no_such_setting": 1}})
    assert bad.status_code == 422 and "no_such_setting" in bad.json()["error"]
    value = {"overrides": {"listener_max_bad_lines": "abc"}}
    bad_value = api.post(f"/v1/matches/{match.id}/start-listener", json=value)
    assert bad_value.status_code == 422 and "listener_max_bad_lines" in bad_value.json()["error"]
    assert not coordination.barriers.is_pending(match.id)  # nothing enqueued
    assert api.post(f"/v1/matches/{uuid.uuid4()}/start-listener").status_code == 404


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sportradar_base_url", "http://elsewhere.example"),
        ("data_dir", "/tmp/elsewhere"),
        ("job_catalog_path", "/tmp/catalog.yaml"),
        ("sentry_dsn", "https://k@elsewhere.example/1"),
        ("listener_body", "tests.lifecycle.bodies:Exploding"),
        ("database_url", "postgresql://elsewhere/db"),
    ],
)
def test_a_start_override_outside_the_per_run_allowlist_is_422_naming_it(
    api, make_match, coordination, key, value
):
    match = make_match(status="scheduled")
    bad = api.post(f"/v1/matches/{match.id}/start-listener", json={"overrides": {key: value}})
    assert bad.status_code == 422, bad.text
    assert bad.json()["field"] == f"overrides.{key}"  # the schema's allowlist refuses it, naming it
    assert not coordination.barriers.is_pending(match.id)  # nothing enqueued


def test_stop_turns_auto_dispatch_off_and_auto_dispatch_turns_it_on(api, make_match, coordination):
    match = make_match(status="scheduled")
    stopped = api.post(f"/v1/matches/{match.id}/stop-listener", json={"reason": "drill"})
    assert stopped.status_code == 200 and stopped.json()["rows_closed"] == 0
    assert Match.get_by_id(match.id).auto_dispatch_listener is False
    on = api.post(f"/v1/matches/{match.id}/auto-dispatch", json={"on": True})
    assert on.status_code == 200 and on.json() == {
        "match_id": str(match.id),
        "auto_dispatch": True,
        "was": False,
    }
    assert Match.get_by_id(match.id).auto_dispatch_listener is True
    assert api.post(f"/v1/matches/{match.id}/auto-dispatch", json={}).status_code == 422


def test_dispatch_and_sweep(api, make_match, coordination):
    match = make_match(status="inprogress")
    dispatched = api.post("/v1/listeners/dispatch", json={"within_minutes": 0})
    assert dispatched.status_code == 200, dispatched.text
    assert str(match.id) in dispatched.json()["match_ids"]
    assert coordination.barriers.is_pending(str(match.id))
    again = api.post("/v1/listeners/dispatch")
    assert again.status_code == 200 and again.json()["skipped"] == 1
    swept = api.post("/v1/listeners/sweep")
    assert swept.status_code == 200 and swept.json()["abandoned"] == 0


def test_a_plain_start_of_an_exhausted_match_answers_409_naming_force_and_a_forced_one_is_enqueued(
    api, make_match, coordination
):
    match = make_match(status="scheduled")
    for _ in range(coordination.attempt_cap):
        coordination.barriers.record_failed_attempt(match.id)
    url = f"/v1/matches/{match.id}/start-listener"
    refused = api.post(url)
    assert refused.status_code == 409, refused.text
    assert "exhausted" in refused.json()["error"] and "--force" in refused.json()["error"]
    assert (
        not coordination.barriers.is_pending(match.id) and Match.get_by_id(match.id).start_message_id is None
    )
    forced = api.post(url, json={"force": True, "reason": "drill"})
    assert forced.status_code == 202 and forced.json()["enqueued"] is True


def test_a_dispatch_over_http_sets_a_poisoned_match_aside_with_its_reason_and_counts_it_in_metrics(
    api, api_server, make_match, coordination
):
    def set_aside_count() -> float:
        text = httpx.get(api_server.url + "/metrics", timeout=60).text
        return sum(
            s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "kickoff_items_set_aside_total" and s.labels.get("loop") == "dispatch"
        )

    poisoned = make_match(status="inprogress", listener_start_settings={"no_such_setting": 1})
    good = make_match(status="inprogress", scheduled=poisoned.scheduled + timedelta(minutes=1))
    before = set_aside_count()
    dispatched = api.post("/v1/listeners/dispatch", json={"within_minutes": 0})
    assert dispatched.status_code == 200, dispatched.text
    body = dispatched.json()
    assert body["match_ids"] == [str(good.id)]
    [entry] = body["set_aside"]
    assert entry["item"] == str(poisoned.id) and "no_such_setting" in entry["reason"]
    assert not coordination.barriers.is_pending(poisoned.id)
    assert set_aside_count() == before + 1


def test_every_match_path_takes_a_uuid_sr_id(api, make_match, coordination):
    """Provider ids are UUIDs: a path naming the sr_id reaches the match (the internal id is tried first)."""
    match = make_match(sr_id=str(uuid.uuid4()), status="scheduled")
    ref = match.sr_id
    shown = api.get(f"/v1/matches/{ref}")
    assert shown.status_code == 200 and shown.json()["id"] == str(match.id)
    board = api.get("/v1/listeners", params={"match_id": ref}).json()
    assert [m["match_id"] for m in board["matches"]] == [str(match.id)]
    started = api.post(f"/v1/matches/{ref}/start-listener")
    assert started.status_code == 202 and started.json()["match_id"] == str(match.id)
    assert coordination.barriers.is_pending(str(match.id))
    stopped = api.post(f"/v1/matches/{ref}/stop-listener", json={"reason": "drill"})
    assert stopped.status_code == 200 and stopped.json()["match_id"] == str(match.id)
    assert Match.get_by_id(match.id).auto_dispatch_listener is False
    on = api.post(f"/v1/matches/{ref}/auto-dispatch", json={"on": True})
    assert on.status_code == 200 and on.json()["match_id"] == str(match.id)
    assert Match.get_by_id(match.id).auto_dispatch_listener is True
    assert api.get(f"/v1/matches/{uuid.uuid4()}").status_code == 404


def test_a_sweep_sets_a_poisoned_row_aside_cleans_the_rest_and_counts_it_in_metrics(
    api, api_server, make_match, coordination, redis_client
):
    from tests.api.test_health_metrics import _samples
    from tests.lifecycle.helpers import poisoned_and_good_runs

    metric = ("kickoff_items_set_aside_total", (("kind", "release_start_lock"), ("loop", "sweep")))
    before = _samples(httpx.get(api_server.url + "/metrics", timeout=60).text).get(metric, 0.0)
    poisoned, poisoned_row, goods = poisoned_and_good_runs(make_match, coordination, redis_client)
    swept = api.post("/v1/listeners/sweep")
    assert swept.status_code == 200, swept.text
    out = swept.json()
    assert out["abandoned"] == 4
    [item] = out["set_aside"]
    assert (item["match_id"], item["record_id"], item["step"]) == (
        str(poisoned.id),
        poisoned_row,
        "release_start_lock",
    )
    for match in goods:
        assert coordination.locks.start_lock_holder(
            match.id
        ) is None and not coordination.barriers.is_pending(match.id)
    after = _samples(httpx.get(api_server.url + "/metrics", timeout=60).text)[metric]
    assert after == before + 1


def test_archive_verify_answers_the_comparison_and_names_the_setting_when_the_feed_fails(
    api, make_match, feed_documents
):
    match = make_match(status="closed")
    url = f"/v1/matches/{match.id}/archive/verify"
    assert api.post(f"/v1/matches/{uuid.uuid4()}/archive/verify").status_code == 404

    broken = api.post(url)  # the feed answers 404 for this game: not a play-by-play
    assert broken.status_code == 502, broken.text
    assert broken.json()["setting"] == "SPORTRADAR_BASE_URL" and "http" not in broken.json()["error"]
    again = api.post(url)  # once a minute per match: the provider is not called again
    assert again.status_code == 429, again.text
    database.execute_sql(  # the minute passed
        "UPDATE matches SET archive_verify_claimed_at = now() - interval '61 seconds' WHERE id = %s",
        (match.id,),
    )

    path = f"/nfl/trial/v7/en/games/{match.sr_id}/pbp.json"
    feed_documents[path] = {"game": {"id": match.sr_id}, "events": [{"id": "e1"}, {"id": "e2"}]}
    answer = api.post(url)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"ok": False, "missing": ["e1", "e2"], "extra": [], "differing": [], "events": 2}
    assert Match.get_by_id(match.id).archive_verification["missing_count"] == 2
    # audited before each call of the provider (the 502 too); the refused 429 called nothing
    verified = audit_entries(action="archive.verify")
    assert [e.target for e in verified] == [f"match:{match.id}"] * 2


def test_the_archive_is_the_event_log_as_the_specs_document_streamed(api, make_match):
    import json

    from models.event_log import NewRow, insert_events

    match = make_match(status="closed")
    assert api.get(f"/v1/matches/{uuid.uuid4()}/archive").status_code == 404
    message = {"payload": {"event": {"id": "e1"}}, "metadata": {"operation": "create"}}
    insert_events(
        [
            NewRow(match_id=str(match.id), message_key=f'["k{i}"]', kind=kind, message=json.dumps(message))
            for i, kind in enumerate(("live", "backfilled"))
        ]
    )
    answer = api.get(f"/v1/matches/{match.id}/archive")
    assert answer.status_code == 200, answer.text
    assert match.sr_id.replace(":", "_") in answer.headers["content-disposition"]
    lines = answer.text.splitlines()
    assert lines[0] == "[" and lines[-1] == "]" and lines[2].startswith(",")
    document = json.loads(answer.text)
    assert document[0] == message and document[1]["kickoff"]["backfilled"] == "play_by_play"


def test_the_board_and_the_match_say_when_the_open_run_is_degraded(api, make_match, coordination):
    match = make_match(status="inprogress")
    record_id = str(uuid.uuid4())
    MatchListenerRecord.create(id=record_id, match=match.id)

    def shown() -> tuple[bool, bool]:
        board = api.get("/v1/listeners", params={"match_id": str(match.id)}).json()
        return board["matches"][0]["degraded"], api.get(f"/v1/matches/{match.id}").json()["listener"][
            "degraded"
        ]

    assert shown() == (False, False)
    coordination.locks.flag_degraded_runs([record_id], [], ttl_seconds=600)  # as the run's heartbeat sets it
    assert shown() == (True, True)
    coordination.locks.flag_degraded_runs([], [record_id], ttl_seconds=600)  # it caught up
    assert shown() == (False, False)


def test_the_openapi_schema_declares_the_boards_entries_with_degraded(api):
    spec = api.get("/openapi.json").json()
    answer = spec["paths"]["/v1/listeners"]["get"]["responses"]["200"]["content"]["application/json"][
        "schema"
    ]
    board = spec["components"]["schemas"][answer["$ref"].rsplit("/", 1)[1]]
    entry = spec["components"]["schemas"][board["properties"]["matches"]["items"]["$ref"].rsplit("/", 1)[1]]
    assert entry["properties"]["degraded"]["type"] == "boolean"
    assert {"badge", "record_id", "takeover"} <= set(entry["properties"])
