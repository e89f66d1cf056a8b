"""Each league's question pipeline over a simulated game of its league: one question per unit, issued and
settled once whatever the order, corrections settle again, deletes reopen, unreadable events set aside."""

from __future__ import annotations

import pkgutil
import threading
import uuid
from datetime import UTC, datetime

import pytest

from config.set_aside import set_aside_count
from listener.pipelines import LOOP
from models import Question
from models.leagues import declared
from srsim.models import PER_UNIT
from srsim.script import GameScript

LEAGUES = [d.name for d in declared()]
UNITS = 4
START = datetime(2030, 1, 1, tzinfo=UTC)


def _pipeline(match_id: str, league: str, token: int | None = None):
    decl = next(d for d in declared() if d.name == league)
    cls = pkgutil.resolve_name(decl.pipeline)
    return cls(match_id=match_id, settings=None, db_gate=threading.Semaphore(), fence_token=token)


def _game(league: str, **kw) -> GameScript:
    return GameScript(sr_id=str(uuid.uuid4()), league=league, event_count=UNITS * PER_UNIT, **kw)


def _questions(match_id: str) -> dict[str, Question]:
    return {q.key: q for q in Question.select().where(Question.match == match_id)}


def _expected_answers(league: str) -> list[str]:
    """What each unit of a plain game ends with, read off the generated ends (the model's outcomes)."""
    out = []
    for env in _game(league).envelopes(START)[PER_UNIT - 1 :: PER_UNIT]:
        event, meta = env["payload"]["event"], env["metadata"]
        if league == "mlb":
            out.append("yes" if "hit" in meta["event_category"].split(",") else "no")
        elif league == "nfl":
            out.append("yes" if event["scoring_drive"] else "no")
        else:
            out.append("yes" if event["home_points"] > event["away_points"] else "no")
    return out


@pytest.mark.parametrize("league", LEAGUES)
def test_a_whole_game_issues_and_settles_one_question_per_unit(league, make_match):
    match = make_match(league)
    pipeline = _pipeline(str(match.id), league)
    for env in _game(league).envelopes(START):
        pipeline.process(env)
    questions = _questions(str(match.id))
    assert len(questions) == UNITS
    assert all(q.status == "settled" for q in questions.values())
    answers = [q.answer for q in sorted(questions.values(), key=lambda q: q.issued_at)]
    assert sorted(answers) == sorted(_expected_answers(league)) and set(answers) == {"yes", "no"}
    assert pipeline.issued == UNITS and pipeline.settled == UNITS and pipeline.set_aside == 0
    assert all(len(q.details["settlements"]) == 1 for q in questions.values())


@pytest.mark.parametrize("league", LEAGUES)
def test_a_second_run_or_a_backfill_in_another_order_changes_nothing(league, make_match):
    match = make_match(league)
    envelopes = _game(league).envelopes(START)
    first = _pipeline(str(match.id), league)
    for env in envelopes:
        first.process(env)
    before = {k: (q.status, q.answer, q.settled_at) for k, q in _questions(str(match.id)).items()}
    successor = _pipeline(str(match.id), league)
    for env in reversed(envelopes):  # ends before starts: settled ones stay as they are
        successor.process({**env, "kickoff": {"backfilled": "play_by_play"}})
    after = {k: (q.status, q.answer, q.settled_at) for k, q in _questions(str(match.id)).items()}
    assert after == before and successor.settled == 0


@pytest.mark.parametrize("league", LEAGUES)
def test_ends_arriving_before_their_starts_create_the_questions_settled_once(league, make_match):
    match = make_match(league)
    pipeline = _pipeline(str(match.id), league)
    envelopes = _game(league).envelopes(START)
    ends = envelopes[PER_UNIT - 1 :: PER_UNIT]
    for env in [*ends, *envelopes]:
        pipeline.process({**env, "kickoff": {"backfilled": "play_by_play"}})
    questions = _questions(str(match.id))
    assert len(questions) == UNITS and all(q.status == "settled" for q in questions.values())
    assert all(len(q.details["settlements"]) == 1 for q in questions.values())


@pytest.mark.parametrize("league", LEAGUES)
def test_a_correction_of_a_settling_event_settles_again_and_a_delete_reopens_recorded(league, make_match):
    match = make_match(league)
    pipeline = _pipeline(str(match.id), league)
    game = _game(league, resettles=1)
    envelopes = game.envelopes(START)
    corrected = next(
        e for e in envelopes if e["metadata"]["operation"] == "update" and _is_resettle(e, envelopes)
    )
    for env in envelopes:
        pipeline.process(env)
    assert pipeline.resettled == 1
    (changed,) = [q for q in _questions(str(match.id)).values() if len(q.details["settlements"]) == 2]
    first, second = changed.details["settlements"]
    assert (first["op"], second["op"]) == ("settled", "resettled") and first["answer"] != second["answer"]
    assert changed.answer == second["answer"]

    event = corrected["payload"]["event"]
    delete = {
        "payload": {
            "event": {"id": event["id"], "type": event["type"], "deleted": "2030-01-01T05:00:00+00:00"}
        },
        "metadata": {**corrected["metadata"], "operation": "delete"},
    }
    pipeline.process(delete)
    reopened = Question.get_by_id(changed.id)
    assert reopened.status == "open" and reopened.answer is None
    assert reopened.details["settlements"][-1]["op"] == "reopened"


def _is_resettle(env: dict, envelopes: list[dict]) -> bool:
    """Whether ``env`` re-sends an earlier message's event (the same id, later version)."""
    event = env["payload"]["event"]
    earlier = [e for e in envelopes if e is not env and e["payload"]["event"].get("id") == event.get("id")]
    return any(e["payload"]["event"].get("updated_at") != event.get("updated_at") for e in earlier) and (
        env["metadata"]["event_category"] != "pitch,ball"
    )


@pytest.mark.parametrize("league", LEAGUES)
def test_an_unreadable_event_is_set_aside_and_the_stream_goes_on(league, make_match):
    match = make_match(league)
    pipeline = _pipeline(str(match.id), league)
    envelopes = _game(league).envelopes(START)
    start, end = envelopes[0], envelopes[PER_UNIT - 1]
    broken = []
    for env in (start, end):  # a missing unit id, an unknown outcome
        copy = {**env, "payload": {**env["payload"], "event": dict(env["payload"]["event"])}}
        broken.append(copy)
    before = set_aside_count(LOOP)
    _break(league, broken)
    for env in [*broken, *envelopes]:
        pipeline.process(env)
    assert pipeline.set_aside >= 1 and set_aside_count(LOOP) - before == pipeline.set_aside
    questions = _questions(str(match.id))
    assert len(questions) == UNITS and all(q.status == "settled" for q in questions.values())


def _break(league: str, broken: list[dict]) -> None:
    start, end = (b["payload"]["event"] for b in broken)
    if league == "mlb":
        start["id"] = ""  # an at-bat without an id
        broken[1]["metadata"] = {**broken[1]["metadata"]}
        end.pop("atbat_id")  # an end naming no at-bat while none is open
    elif league == "nfl":
        start["id"] = None
        end["end_reason"] = "Alien Abduction"
    else:
        start["period"] = {"number": 1}
        end["home_points"] = None


def _state(match_id: str) -> dict[str, tuple]:
    """Each question as a comparison sees it: status, answer, prompt, details without the times."""
    out = {}
    for key, q in _questions(match_id).items():
        details = dict(q.details)
        details["settlements"] = [
            {k: v for k, v in s.items() if k != "at"} for s in details.get("settlements", [])
        ]
        out[key] = (q.status, q.answer, q.prompt, details)
    return out


@pytest.mark.parametrize("league", LEAGUES)
def test_a_batch_of_committed_events_writes_what_the_events_one_by_one_write(league, make_match):
    # The listener hands the pipeline each committed batch of the event log at once (one call to
    # kickoff_question_ops): issues, settles, corrections, deletes and a backfill's reversed order
    # end exactly as the same events processed one at a time.
    envelopes = _game(league, resettles=1).envelopes(START)
    corrected = next(
        e for e in envelopes if e["metadata"]["operation"] == "update" and _is_resettle(e, envelopes)
    )
    event = corrected["payload"]["event"]
    delete = {
        "payload": {
            "event": {"id": event["id"], "type": event["type"], "deleted": "2030-01-01T05:00:00+00:00"}
        },
        "metadata": {**corrected["metadata"], "operation": "delete"},
    }
    backfill = [{**e, "kickoff": {"backfilled": "play_by_play"}} for e in reversed(envelopes)]
    stream = [*envelopes, delete, *backfill]
    one, batched = make_match(league), make_match(league)
    single = _pipeline(str(one.id), league)
    for env in stream:
        single.process(env)
    batches = _pipeline(str(batched.id), league, token=None)
    for start in range(0, len(stream), 5):
        batches.process_batch(stream[start : start + 5])
    assert _state(str(batched.id)) == _state(str(one.id)) and _state(str(one.id))
    assert (batches.issued, batches.settled, batches.resettled, batches.reopened) == (
        single.issued,
        single.settled,
        single.resettled,
        single.reopened,
    )
