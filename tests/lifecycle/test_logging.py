"""One log format: kickoff's formatter in workers and the CLI, LOG_FORMAT=json, message and match ids."""

from __future__ import annotations

import json
import logging
import sys

from config.log import KickoffFormatter, LogContextFilter, set_log_context
from tests.lifecycle.helpers import rows_of
from tests.waiting import wait_for


def _record(msg: str) -> logging.LogRecord:
    record = logging.LogRecord("kickoff.test", logging.INFO, __file__, 1, msg, (), None)
    LogContextFilter().filter(record)
    return record


def test_a_record_carries_the_message_and_match_of_its_thread_in_text_and_json():
    set_log_context(actor="start_match_listener", message_id="m-1", match_id="abc")
    try:
        text = KickoffFormatter("text").format(_record("hello"))
        doc = json.loads(KickoffFormatter("json").format(_record("hello")))
    finally:
        set_log_context(actor=None, message_id=None, match_id=None)
    assert "(start_match_listener msg=m-1 match=abc): hello" in text
    assert doc["message"] == "hello" and doc["message_id"] == "m-1" and doc["match_id"] == "abc"
    assert "message_id" not in json.loads(KickoffFormatter("json").format(_record("outside")))


def test_worker_lines_are_json_with_message_and_match_ids_and_no_results_noise(
    kick, make_match, start_worker, broker_queues
):
    worker = start_worker(queues=("match_listeners",), env={"LOG_FORMAT": "json"})
    match = make_match()
    out = json.loads(
        kick(
            "listeners", "start", str(match.id), "--override", "listener_test_duration_seconds=0.3", "--json"
        ).output
    )
    wait_for(lambda: rows_of(match) and rows_of(match)[0].ended_at is not None, timeout=60)
    lines = [ln for ln in worker.output().splitlines() if ln.startswith("{")]
    docs = [json.loads(ln) for ln in lines]
    mine = [d for d in docs if d.get("message_id") == out["message_id"]]
    assert mine and all(d["match_id"] == str(match.id) for d in mine)
    assert "discarded" not in worker.output()
    assert any("ready for action" in d["message"] for d in docs)


def test_a_one_shot_command_prints_what_it_did_once(kick, caplog):
    with caplog.at_level(logging.INFO):
        out = kick("leagues", "add", "nfl").output
    assert out.strip() == "league nfl added (enabled)"


def test_urls_in_a_line_and_its_traceback_are_masked_in_text_and_json():
    url = "postgresql://u:pw1@h/db?password=pw2&sslmode=require"
    try:
        raise RuntimeError(f"cannot open {url}")
    except RuntimeError:
        record = logging.LogRecord("kickoff", logging.WARNING, __file__, 1, "at %s", (url,), None)
        record.exc_info = sys.exc_info()
    for kind in ("text", "json"):
        line = KickoffFormatter(kind).format(record)
        assert "pw1" not in line and "pw2" not in line, line
        assert "postgresql://u:***@h/db?password=***&sslmode=require" in line
