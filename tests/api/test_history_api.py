"""GET /v1/history/{series} against a real `kickoff serve`: the JSON, the read scope, the 422s, and the
trigger answers the API process counts itself."""

from __future__ import annotations

import httpx
import pytest

from models.history_series import RANGES, SERIES
from tests.api.conftest import bearer
from tests.waiting import wait_for

pytestmark = pytest.mark.services


@pytest.mark.parametrize("series", sorted(SERIES))
def test_every_declared_series_answers_its_buckets_with_a_read_key(api_server, keys, series):
    answer = httpx.get(f"{api_server.url}/v1/history/{series}", headers=bearer(keys["read"]), timeout=30)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["series"] == series and body["range"] == "1h" and body["step_seconds"] == 60
    assert len(body["times"]) == 60 and "all" in body["values"]
    assert all(len(line) == len(body["times"]) for line in body["values"].values())
    assert body["title"] == SERIES[series].title and body["kind"] in ("counter", "gauge")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/history/no_such_series", "series"),
        ("/v1/history/events?range=2h", "range"),
        ("/v1/history/events?top=0", "top"),
        ("/v1/history/events?top=51", "top"),
        ("/v1/history/events?until=yesterday", "until"),
        ("/v1/history/events?until=2030-01-01T00:00:00", "until"),  # no offset: not a point in time
        ("/v1/history/events?key=", "key"),
    ],
)
def test_a_bad_parameter_is_422_naming_it(api_server, keys, path, field):
    answer = httpx.get(api_server.url + path, headers=bearer(keys["read"]), timeout=30)
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == field, answer.json()


def test_a_trigger_key_cannot_read_the_history_and_no_key_is_401(api_server, keys):
    url = f"{api_server.url}/v1/history/events"
    assert httpx.get(url, headers=bearer(keys["trigger"]), timeout=30).status_code == 403
    assert httpx.get(url, timeout=30).status_code == 401


def test_until_ends_the_range_there_and_each_range_has_its_step(api_server, keys):
    for name, span in RANGES.items():
        body = httpx.get(
            f"{api_server.url}/v1/history/triggers",
            params={"range": name, "until": "2030-06-01T12:00:00+00:00"},
            headers=bearer(keys["read"]),
            timeout=30,
        ).json()
        assert body["step_seconds"] == span.step_seconds and body["end"].startswith("2030-06-01T12:00:00")
        assert body["times"][-1] == 1906545600 // span.step_seconds * span.step_seconds


def test_the_api_counts_the_trigger_answers_it_gives_by_queue_and_answer(api, api_server, keys):
    lineup = {
        "league_id": "L1",
        "team_id": "7",
        "swaps": [{"player_id": 3139477, "to_slot": "BE"}],
        "idempotency_key": "history-lineup-1",
    }
    first = api.post("/v1/trigger/lineup", json=lineup)
    assert first.status_code == 202, first.text
    assert api.post("/v1/trigger/lineup", json=lineup).json()["status"] == "duplicate"

    def counted() -> dict[str, float]:
        body = httpx.get(
            f"{api_server.url}/v1/history/triggers",
            params={"top": 50},
            headers=bearer(keys["read"]),
            timeout=30,
        ).json()
        return {key: sum(v for v in line if v) for key, line in body["values"].items() if key != "all"}

    # at least: the session's server also counts what other tests sent, flushed after their cleanup
    wanted = (f"lineup_updates {first.json()['status']}", "lineup_updates duplicate")
    wait_for(lambda: all(counted().get(k, 0) >= 1 for k in wanted), timeout=30, what="the counts flushed")
