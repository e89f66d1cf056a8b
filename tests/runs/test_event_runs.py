"""Event runs (trigger event, dedupe key job@key@debounce_window): the library, `kickoff runs
publish --event KEY --debounce-seconds N`, one run per key and window (real PostgreSQL, RabbitMQ)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from models.run_log import JobRunOutbox, RunLog
from runs.errors import InvalidTrigger
from runs.publish import publish_run
from tests.runs.conftest import roomy_debounce, window_end
from tests.runs.test_cli_runs import kickoff
from tests.waiting import wait_for


def _event(catalog, key: str = "match-1", **kwargs):
    return publish_run("noop", trigger="event", event_key=key, catalog=catalog, publisher=None, **kwargs)


def test_events_of_one_key_in_one_window_of_their_own_debounce_are_one_run(db, catalog, frozen_clock):
    frozen_clock.now = datetime(2024, 5, 21, 18, 0, 5, tzinfo=UTC)
    first = _event(catalog, debounce_seconds=120)
    frozen_clock.now = datetime(2024, 5, 21, 18, 1, 59, tzinfo=UTC)
    second = _event(catalog, debounce_seconds=120)
    other_key = _event(catalog, "match-2", debounce_seconds=120)
    frozen_clock.now = datetime(2024, 5, 21, 18, 2, 0, tzinfo=UTC)
    next_window = _event(catalog, debounce_seconds=120)

    assert first.dedupe_key == "noop@match-1@2024-05-21T18:00:00Z"
    assert (second.status, second.run_id, second.dedupe_key) == ("duplicate", first.run_id, first.dedupe_key)
    assert other_key.status == "pending" and other_key.run_id != first.run_id
    assert next_window.status == "pending" and next_window.dedupe_key == "noop@match-1@2024-05-21T18:02:00Z"
    assert RunLog.get_by_id(first.run_id).trigger == "event"
    assert RunLog.select().count() == 3 and JobRunOutbox.select().count() == 3


def test_an_event_without_a_debounce_takes_the_jobs_else_60_seconds(db, catalog, frozen_clock):
    frozen_clock.now = datetime(2024, 5, 21, 18, 0, 59, tzinfo=UTC)
    assert _event(catalog).dedupe_key == "noop@match-1@2024-05-21T18:00:00Z"  # noop: no debounce, 60 s
    refresh = publish_run("event_refresh", trigger="event", event_key="k", catalog=catalog, publisher=None)
    assert refresh.dedupe_key == "event_refresh@k@2024-05-21T18:00:30Z"  # its catalog debounce, 30 s


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"debounce_seconds": 0}, "debounce_seconds", id="zero-debounce"),
        pytest.param({"debounce_seconds": -5}, "debounce_seconds", id="negative-debounce"),
        pytest.param({"debounce_seconds": float("nan")}, "debounce_seconds", id="nan-debounce"),
        pytest.param({"debounce_seconds": 31 * 86400 + 1}, "debounce_seconds", id="debounce-over-31-days"),
        pytest.param({"debounce_seconds": True}, "debounce_seconds", id="boolean-debounce"),
        pytest.param({"event_key": "  "}, "event_key", id="blank-key"),
        pytest.param({"event_key": "k" * 201}, "event_key", id="key-over-200"),
    ],
)
def test_an_out_of_bounds_event_saves_nothing_and_names_its_field(db, catalog, kwargs, field):
    with pytest.raises(InvalidTrigger) as caught:
        _event(catalog, **{"key": kwargs.pop("event_key", "match-1"), **kwargs})
    assert caught.value.field == field
    assert RunLog.select().count() == 0


def test_an_event_key_or_debounce_on_another_trigger_is_refused(db, catalog):
    with pytest.raises(InvalidTrigger) as caught:
        publish_run("noop", trigger="manual", event_key="k", catalog=catalog, publisher=None)
    assert caught.value.field == "trigger"
    with pytest.raises(InvalidTrigger):
        publish_run("noop", trigger="cli", debounce_seconds=5, catalog=catalog, publisher=None)
    assert RunLog.select().count() == 0


def _publish_event(env, key: str, seconds: float) -> dict:
    args = ["runs", "publish", "noop", "--event", key, "--debounce-seconds", str(seconds), "--json"]
    out = kickoff(env, *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_kickoff_runs_publish_event_twice_in_one_window_answers_duplicate_with_the_first_run(
    db, publisher, subprocess_env
):
    seconds = roomy_debounce()
    first = _publish_event(subprocess_env, "match-1", seconds)
    second = _publish_event(subprocess_env, "match-1", seconds)
    assert first["status"] == "queued" and first["published"] is True
    assert (second["status"], second["run_id"]) == ("duplicate", first["run_id"])
    assert first["dedupe_key"].startswith("noop@match-1@")
    run = RunLog.get_by_id(first["run_id"])
    assert (run.trigger, run.dedupe_key) == ("event", first["dedupe_key"])
    args = ["runs", "publish", "noop", "--event", "match-1", "--debounce-seconds", str(seconds)]
    text = kickoff(subprocess_env, *args)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"duplicate {first['run_id']} noop (a run of {first['dedupe_key']} exists)")


def test_kickoff_runs_publish_event_in_the_next_window_is_a_new_run(db, publisher, subprocess_env):
    first = _publish_event(subprocess_env, "match-1", 1)
    end = window_end(first["dedupe_key"], 1)
    wait_for(lambda: time.time() >= end, timeout=10, what="the event's 1 s window to end")
    later = _publish_event(subprocess_env, "match-1", 1)
    assert later["status"] == "queued" and later["run_id"] != first["run_id"]
    assert window_end(later["dedupe_key"], 1) > end
    assert RunLog.select().where(RunLog.trigger == "event").count() == 2


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        pytest.param(["--debounce-seconds", "5"], 2, "--debounce-seconds needs --event", id="debounce-alone"),
        pytest.param(["--event", "k", "--trigger", "manual"], 2, "drop --trigger", id="event-and-trigger"),
        pytest.param(["--event", "k", "--debounce-seconds", "0"], 2, "x>0", id="zero-debounce"),
        pytest.param(
            ["--event", "k", "--debounce-seconds", "2678401"], 3, "debounce_seconds", id="over-31-days"
        ),
    ],
)
def test_kickoff_runs_publish_event_refusals_save_nothing(db, subprocess_env, args, code, says):
    out = kickoff(subprocess_env, "runs", "publish", "noop", *args)
    assert out.returncode == code and says in out.stderr, out.stderr
    assert RunLog.select().count() == 0
