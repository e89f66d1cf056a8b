"""The processed watermark: a batch the event log committed but no run processed (a SIGKILL between the
two) is processed by the next run at its start, each question issued and settled exactly once; a replay
after the processing committed changes nothing; a stale run cannot move the watermark."""

from __future__ import annotations

import json
import pkgutil
import threading
import uuid
from datetime import UTC, datetime

import pytest

from lifecycle.sql import rows
from listener.body import ListenerContext
from listener.event_log import EventLog
from listener.log_writer import LogWriter
from listener.match_info import stream_status_of
from models import Match, Question
from models.errors import FencedWrite
from models.leagues import declared
from models.status import apply_stream_status
from srsim.models import PER_UNIT
from srsim.script import GameScript
from tests.listener.conftest import Outcome, run_listener

LEAGUES = [d.name for d in declared()]
UNITS = 6
START = datetime(2030, 1, 1, tzinfo=UTC)
HEARTBEAT = b'{"heartbeat":{"interval":5000}}\n'
#: A run ends soon after its feed does (no reconnect; the play-by-play, absent here, not waited for).
FAST_END = {
    "listener_reconnect_attempts": 0,
    "listener_backfill_backoff_seconds": 0.05,
    "listener_backfill_backoff_max_seconds": 0.1,
}


def _pipeline(match_id: str, league: str, token: int | None = None):
    decl = next(d for d in declared() if d.name == league)
    cls = pkgutil.resolve_name(decl.pipeline)
    return cls(match_id=match_id, settings=None, db_gate=threading.Semaphore(), fence_token=token)


def _game(league: str) -> GameScript:
    return GameScript(sr_id=str(uuid.uuid4()), league=league, event_count=UNITS * PER_UNIT, resettles=2)


def _new_run(match) -> tuple[str, int]:
    record_id = str(uuid.uuid4())
    token = rows.create_row(record_id=record_id, match_id=str(match.id), message_id=None, dry_run=False)
    return record_id, token


def _questions(match_id: str) -> dict[str, tuple]:
    """Each question's outcome and its record of settles (the times left out)."""
    out = {}
    for q in Question.select().where(Question.match == match_id):
        record = [(s["op"], s["answer"], s["event_id"]) for s in q.details.get("settlements", [])]
        out[q.key] = (q.status, q.answer, record)
    return out


def _reference(league: str, envelopes: list[dict], make_match) -> dict[str, tuple]:
    """What the game's messages make when one run processes them all, without a crash."""
    match = make_match(league)
    pipeline = _pipeline(str(match.id), league)
    for env in envelopes:
        pipeline.process(env)
    return _questions(str(match.id))


def _status_after(envelopes: list[dict]) -> str:
    status = "inprogress"
    for env in envelopes:
        incoming = stream_status_of(env)
        if incoming is not None:
            status = apply_stream_status(status, incoming)
    return status


def _listen(match, record_id: str, token: int, settings, feed) -> Outcome:
    settings = settings.model_copy(update={"sportradar_base_url": feed.base_url})
    ctx = ListenerContext(
        match_id=str(match.id), record_id=record_id, is_test=False, settings=settings, fence_token=token
    )
    out = run_listener(ctx, timeout=60)
    assert out.code is not None and "fenced" not in out.listener.exit_reason, out.listener.exit_reason
    return out


def _feed_of(envelopes: list[dict]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in envelopes) + HEARTBEAT * 3


def _log_without_processing(match, record_id: str, token: int, envelopes: list[dict]) -> None:
    """The crash window: the run's writer committed these messages, and its process died before its
    processing thread ran (what a SIGKILL between the two leaves)."""
    log = EventLog(
        match_id=str(match.id),
        writer=LogWriter(buffer_limit=10_000, retry_seconds=0.05),
        record_id=record_id,
        fence_token=token,
    ).open()
    assert len(log.record_all(envelopes)) == len(envelopes)


@pytest.mark.parametrize("league", LEAGUES)
def test_messages_logged_but_never_processed_are_processed_once_by_the_next_run(
    league, make_match, raw_feed, listener_settings
):
    game = _game(league)
    envelopes = game.envelopes(START)
    match = make_match(league, sr_id=game.sr_id, status="inprogress")
    settings = listener_settings(**FAST_END)
    half = len(envelopes) // 2

    # The first run streams and processes the first half, then logs the second half and is killed
    # before processing it.
    first_id, first = _new_run(match)
    _listen(match, first_id, first, settings, raw_feed(_feed_of(envelopes[:half])))
    _log_without_processing(match, first_id, first, envelopes[half:])

    # Its successor takes the match over; the provider replays the second half (duplicates now).
    second_id, second = _new_run(match)
    out = _listen(match, second_id, second, settings, raw_feed(_feed_of(envelopes[half:])))

    assert _questions(str(match.id)) == _reference(league, envelopes, make_match)
    assert len(_questions(str(match.id))) == UNITS
    assert Match.get_by_id(match.id).status == _status_after(envelopes)
    assert out.listener.stats.reprocessed == len(envelopes) - half


@pytest.mark.parametrize("league", LEAGUES)
def test_a_run_after_one_whose_processing_committed_replays_nothing_twice(
    league, make_match, raw_feed, listener_settings
):
    # The first run processes the whole game (re-settles included), its last batches committed with the
    # watermark; a successor (a takeover, a restart) reprocesses nothing that changes a question.
    game = _game(league)
    envelopes = game.envelopes(START)
    match = make_match(league, sr_id=game.sr_id, status="inprogress")
    settings = listener_settings(**FAST_END)
    first_id, first = _new_run(match)
    _listen(match, first_id, first, settings, raw_feed(_feed_of(envelopes)))
    before = _questions(str(match.id))
    assert before == _reference(league, envelopes, make_match)
    from models.processed import processed_seq

    assert processed_seq(match.id) > 0

    second_id, second = _new_run(match)
    out = _listen(match, second_id, second, settings, raw_feed(_feed_of(envelopes)))
    assert out.listener.stats.reprocessed == 0  # the first run's end marked everything it processed
    assert _questions(str(match.id)) == before


@pytest.mark.parametrize("league", LEAGUES)
def test_a_batch_and_its_watermark_commit_together_so_a_replay_past_it_changes_nothing(league, make_match):
    # The watermark moves in the batch's transaction: a replay from it (what a successor does) repeats
    # no settle, re-settle or reopen of a batch that committed, whatever its messages were.
    game = _game(league)
    envelopes = game.envelopes(START)
    match = make_match(league, sr_id=game.sr_id, status="inprogress")
    record_id, token = _new_run(match)
    _log_without_processing(match, record_id, token, envelopes)
    keys = [u.key for u in _logged(match)]
    pipeline = _pipeline(str(match.id), league, token)
    cut = len(envelopes) - PER_UNIT  # the last unit's messages are the crash window
    for start in range(0, cut, 5):
        end = min(start + 5, cut)
        pipeline.process_batch(envelopes[start:end], through=keys[end - 1])
    # The last batch that wrote something carries the watermark; the messages after it wrote nothing.
    from models.processed import processed_seq, unprocessed_pages

    after = [u.message for page in unprocessed_pages(match.id, after=processed_seq(match.id)) for u in page]
    assert after == envelopes[len(envelopes) - len(after) :]
    successor = _pipeline(str(match.id), league, token)
    successor.process_batch(after, through=keys[-1])
    assert _questions(str(match.id)) == _reference(league, envelopes, make_match)
    assert successor.resettled == 0 and successor.reopened == 0


def test_a_stale_run_cannot_move_the_watermark(make_match):
    game = _game("mlb")
    envelopes = game.envelopes(START)
    match = make_match("mlb", sr_id=game.sr_id, status="inprogress")
    record_id, token = _new_run(match)
    _log_without_processing(match, record_id, token, envelopes)
    keys = [u.key for u in _logged(match)]
    _new_run(match)  # a successor took the match over
    from models.processed import processed_seq

    stale = _pipeline(str(match.id), "mlb", token)
    with pytest.raises(FencedWrite):
        stale.process_batch(envelopes[:PER_UNIT], through=keys[PER_UNIT - 1])
    assert processed_seq(match.id) == 0 and _questions(str(match.id)) == {}


def _logged(match) -> list:
    """The log's rows with their keys, in arrival order (models.processed's reader, from the start)."""
    from models.processed import unprocessed_pages

    return [u for page in unprocessed_pages(match.id, after=0) for u in page]


#: What ``PoisonedPipeline`` processed, by match id (a test's pipeline is made by the listener).
SEEN: dict[str, list[str]] = {}


class PoisonedPipeline:
    """A pipeline named by LISTENER_PIPELINE that fails on the event ``poison`` (no ``process_batch``)."""

    def __init__(self, *, match_id: str, **_: object) -> None:
        self.match_id = match_id

    def process(self, message: dict) -> None:
        event_id = message["payload"]["event"]["id"]
        if event_id == "poison":
            raise RuntimeError("this pipeline cannot handle it")
        SEEN.setdefault(self.match_id, []).append(event_id)

    def close(self) -> None:
        return None


def test_a_message_the_replay_cannot_process_is_set_aside_and_not_retried_by_every_run(
    make_match, raw_feed, listener_settings
):
    from config.set_aside import set_aside_count
    from listener.match_listener import REPLAY_LOOP

    sr_id = str(uuid.uuid4())
    match = make_match("mlb", sr_id=sr_id, status="inprogress")

    def event(event_id: str) -> dict:
        return {
            "payload": {"game": {"id": sr_id}, "event": {"id": event_id, "type": "pitch"}},
            "metadata": {"match": f"sd:match:{sr_id}", "operation": "create"},
        }

    settings = listener_settings(**FAST_END, listener_pipeline=f"{__name__}:PoisonedPipeline")
    first_id, first = _new_run(match)
    _log_without_processing(match, first_id, first, [event("a"), event("poison"), event("c")])
    before = set_aside_count(REPLAY_LOOP)

    second_id, second = _new_run(match)
    _listen(match, second_id, second, settings, raw_feed(HEARTBEAT * 3))
    assert SEEN[str(match.id)] == ["a", "c"]
    assert set_aside_count(REPLAY_LOOP) - before == 1

    third_id, third = _new_run(match)
    out = _listen(match, third_id, third, settings, raw_feed(HEARTBEAT * 3))
    assert out.listener.stats.reprocessed == 0 and SEEN[str(match.id)] == ["a", "c"]
