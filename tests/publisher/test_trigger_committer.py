"""Group commit: concurrent triggers saved and published together, each caller with its own answer."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from config.errors import DatabaseUnavailable
from models.db import database
from publisher import trigger_saves
from publisher.amqp import AmqpPublisher
from publisher.errors import TriggerValidationError
from publisher.queues import LINEUP_UPDATES
from publisher.trigger_saves import TriggerCommitter, TriggerResult, TriggerSave, TriggerStatus
from publisher.triggers import trigger_lineup
from tests.publisher.helpers import count, lineup
from tests.waiting import wait_for

CALLERS = 24


def _save(n: int) -> TriggerSave:
    return TriggerSave(
        queue=LINEUP_UPDATES,
        league_id="L1",
        team=str(n),
        key=f"k{n}",
        decision_inputs={},
        request={},
        body={},
        traceparent=None,
    )


class FakeSaves:
    """``save_and_publish`` that holds each batch until released and records what it saw."""

    def __init__(self, answer: Callable[[TriggerSave], Any] | None = None) -> None:
        self.batches: list[list[str]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.release = threading.Event()
        self.answer = answer or (lambda save: (TriggerResult(TriggerStatus.QUEUED, save.team), None))
        self._lock = threading.Lock()

    def __call__(self, saves: Sequence[TriggerSave], **_: Any) -> list[Any]:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.batches.append([s.team for s in saves])
        self.release.wait(30)
        with self._lock:
            self.in_flight -= 1
        return [self.answer(s) for s in saves]


def _submit_all(committer: TriggerCommitter, fake: FakeSaves, n: int = CALLERS) -> list[Any]:
    """``n`` callers at once; the first batches are held until every caller waits, then released."""

    def one(i: int) -> Any:
        try:
            return committer.submit(_save(i), publisher=None)  # type: ignore[arg-type]
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        wait_for(
            lambda: sum(len(b) for b in fake.batches) + len(committer._waiting) == n,
            timeout=30,
            what="every caller leading or waiting",
        )
        fake.release.set()
        return [f.result(timeout=60) for f in futures]


def test_concurrent_callers_share_batches_and_each_gets_its_own_answer(monkeypatch):
    fake = FakeSaves()
    monkeypatch.setattr(trigger_saves, "save_and_publish", fake)
    committer = TriggerCommitter(settings=None, leaders=2)  # type: ignore[arg-type]
    answers = _submit_all(committer, fake)
    assert [a[0].tracking_id for a in answers] == [str(i) for i in range(CALLERS)]
    saved = [team for batch in fake.batches for team in batch]
    assert sorted(saved, key=int) == [str(i) for i in range(CALLERS)]  # each save exactly once
    assert fake.most_in_flight == 2  # never more batches at once than leaders
    assert max(len(b) for b in fake.batches) > 1  # the waiting callers went together
    assert committer._in_flight == 0 and committer._waiting == []


def test_a_failed_batch_fails_its_callers_and_a_refused_save_only_its_own(monkeypatch):
    def answer(save: TriggerSave) -> Any:
        if save.team == "5":
            return TriggerValidationError("swaps[0].player_id", "a Sleeper id")
        return TriggerResult(TriggerStatus.QUEUED, save.team), None

    fake = FakeSaves(answer)
    calls = {"n": 0}

    def first_batch_fails(saves: Sequence[TriggerSave], **kw: Any) -> list[Any]:
        calls["n"] += 1
        result = fake(saves, **kw)
        if calls["n"] == 1:
            raise DatabaseUnavailable(
                service="PostgreSQL", setting="DATABASE_URL", address="db", reason="went away"
            )
        return result

    monkeypatch.setattr(trigger_saves, "save_and_publish", first_batch_fails)
    committer = TriggerCommitter(settings=None, leaders=1)  # type: ignore[arg-type]
    answers = _submit_all(committer, fake, n=8)
    first = set(fake.batches[0])
    for i, answer_ in enumerate(answers):
        if str(i) in first:
            assert isinstance(answer_, DatabaseUnavailable)
        elif i == 5:
            assert isinstance(answer_, TriggerValidationError) and answer_.field == "swaps[0].player_id"
        else:
            assert answer_[0].tracking_id == str(i)
    assert committer._in_flight == 0  # the lead was handed on after the failure


def test_concurrent_triggers_on_the_services_keep_every_rule(db, fresh_queues, pub_settings, read_queue):
    """Through one committer: each key saved once (the twin answers duplicate with the same tracking
    id), a Sleeper id refused for its caller only, every new action published once."""
    database.execute_sql("INSERT INTO players (sleeper_id, synced_at) VALUES ('4046', now())")
    committer = TriggerCommitter(settings=pub_settings)
    local = threading.local()
    publishers: list[AmqpPublisher] = []

    def send(i: int) -> Any:
        if not hasattr(local, "publisher"):
            local.publisher = AmqpPublisher(url=pub_settings.amqp_url, confirm_timeout=5.0)
            publishers.append(local.publisher)
        player = 4046 if i == 0 else 3139477
        request = lineup(idempotency_key=f"key-{i // 2}", swaps=[{"player_id": player, "to_slot": "BE"}])
        try:
            return trigger_lineup(
                request, publisher=local.publisher, settings=pub_settings, committer=committer
            )
        except TriggerValidationError as exc:
            return exc

    try:
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(send, range(32)))
    finally:
        for pub in publishers:
            pub.close()
    assert isinstance(answers[0], TriggerValidationError) and answers[0].field == "swaps[0].player_id"
    for key in range(1, 16):
        twins = answers[2 * key], answers[2 * key + 1]
        assert sorted(a.status for a in twins) == [TriggerStatus.DUPLICATE, TriggerStatus.QUEUED]
        assert twins[0].tracking_id == twins[1].tracking_id
    # key-0: the refused caller saved nothing, its twin saved the key
    assert answers[1].status is TriggerStatus.QUEUED
    assert count("activity_actions") == 16 and count("outbox_messages", "status = 'published'") == 16
    published = sorted(body["tracking_id"] for body, _ in read_queue(LINEUP_UPDATES))
    assert published == sorted(a.tracking_id for a in answers[1:] if a.status is TriggerStatus.QUEUED)


@pytest.mark.parametrize("leaders", [1, 2])
def test_a_lone_caller_leads_at_once(monkeypatch, leaders):
    fake = FakeSaves()
    fake.release.set()
    monkeypatch.setattr(trigger_saves, "save_and_publish", fake)
    committer = TriggerCommitter(settings=None, leaders=leaders)  # type: ignore[arg-type]
    assert committer.submit(_save(1), publisher=None)[0].tracking_id == "1"  # type: ignore[arg-type]
    assert fake.batches == [["1"]] and committer._in_flight == 0


def test_a_save_the_database_refuses_fails_alone_and_the_rest_of_its_batch_is_saved(
    db, fresh_queues, pub_settings, publisher, read_queue
):
    good = [
        TriggerSave(
            queue=LINEUP_UPDATES,
            league_id="L1",
            team=team,
            key=f"k-{team}",
            decision_inputs={},
            request={"swaps": []},
            body={"league_id": "L1", "team_id": team},
            traceparent=None,
        )
        for team in ("7", "8")
    ]
    bad = TriggerSave(  # past validation: PostgreSQL stores no NUL in text
        queue=LINEUP_UPDATES,
        league_id="L1",
        team="9\x00",
        key="k-9",
        decision_inputs={},
        request={},
        body={},
        traceparent=None,
    )
    answers = trigger_saves.save_and_publish(
        [good[0], bad, good[1]], publisher=publisher, settings=pub_settings
    )
    assert isinstance(answers[1], TriggerValidationError)
    assert [a[0].status for a in (answers[0], answers[2])] == [TriggerStatus.QUEUED, TriggerStatus.QUEUED]
    assert count("activity_actions") == 2 and len(read_queue(LINEUP_UPDATES)) == 2


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"team_id": "7\x00"}, "team_id"),
        ({"decision_inputs": {"note": "a\x00b"}}, "decision_inputs"),
        ({"idempotency_key": "k\x00"}, "idempotency_key"),
    ],
)
def test_a_nul_character_is_refused_naming_the_field(fields, field):
    with pytest.raises(TriggerValidationError) as refused:
        trigger_lineup(lineup(**fields), publisher=None, settings=None)  # type: ignore[arg-type]
    assert refused.value.field == field
