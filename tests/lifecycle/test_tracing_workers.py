"""A dispatch tick, the start it sends and the listener run are one trace on real workers; a stop links to it.

The workers export to an OTLP/HTTP receiver in the test (tests/otlp_receiver.py).
"""

from __future__ import annotations

import pytest

from config import spans
from models.listener_record import MatchListenerRecord
from tests.lifecycle.helpers import rows_of
from tests.otlp_receiver import otlp_receiver
from tests.waiting import wait_for

CONSUMER = 5  # OTLP span kind


@pytest.fixture
def receiver():
    with otlp_receiver() as rx:
        yield rx


def test_a_dispatch_tick_its_start_and_the_listener_run_are_one_trace_and_the_stop_links_to_the_run(
    kick, make_match, start_worker, broker_queues, receiver
):
    start_worker(queues=("default",), threads=2, env=receiver.env())
    start_worker(queues=("match_listeners",), env=receiver.env())
    match = make_match()
    kick("enqueue", "dispatch_upcoming_match_listeners", "--kw", "within_minutes=30")
    wait_for(lambda: rows_of(match), timeout=60, what="the listener's row")
    kick("enqueue", "stop_match_listener", "--kw", f"match_id={match.id}", "--reason", "drill")
    run = receiver.wait_for_span(
        lambda s: s.name == "listener run" and s.attributes.get("kickoff.match_id") == str(match.id),
        what="the listener run's span",
    )
    start = receiver.wait_for_span(lambda s: s.span_id == run.parent_id, what="the start's span")
    assert start.name == "start_match_listener process" and start.kind == CONSUMER
    assert start.parent_id, f"the start has no parent: {start} (all spans: {receiver.spans()})"
    tick = receiver.wait_for_span(lambda s: s.span_id == start.parent_id, what="the dispatch tick's span")
    assert tick.name == "dispatch_upcoming_match_listeners process" and tick.parent_id == ""
    assert run.attributes["kickoff.exit_code"] == 15
    assert [name for name, _ in run.events] == ["exit"] and run.events[0][1]["code"] == 15
    [record] = MatchListenerRecord.select().where(MatchListenerRecord.match == match.id)
    assert spans.trace_id_of(record.traceparent) == run.trace_id  # what the console shows
    assert record.traceparent.startswith(f"00-{run.trace_id}-{run.span_id}-")
    stop = receiver.wait_for_span(lambda s: s.name == "stop_match_listener process", what="the stop's span")
    assert stop.trace_id != run.trace_id and (run.trace_id, run.span_id) in stop.links
