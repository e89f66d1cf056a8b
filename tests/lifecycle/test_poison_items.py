"""One bad item never stops a loop: dispatch and schedule refresh set it aside and go on with the rest.

Each test puts the poisoned items first (the order the loop meets them) and good ones after.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
import redis

from config.clock import utcnow
from config.set_aside import set_aside_count
from tests.lifecycle.helpers import dispatch, reload


def _set_aside_lines(caplog, loop: str) -> list[str]:
    """The log lines of items ``loop`` set aside."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "config.set_aside" and r.getMessage().startswith(f"{loop}: ")
    ]


def _assert_lines_say(lines: list[str], *expected: tuple[str, ...]) -> None:
    """One line per entry of ``expected``, in order, each holding every fragment of its entry."""
    assert len(lines) == len(expected), lines
    for line, fragments in zip(lines, expected, strict=True):
        for fragment in fragments:
            assert fragment in line, (fragment, line)


@pytest.fixture
def real_senders(send_start):
    from actors.listeners import send_starts

    return {"send": send_start, "send_batch": send_starts}


def test_dispatch_sets_aside_matches_whose_stored_settings_would_fail_the_start_and_sends_the_rest(
    make_match, lsettings, lcoordination, real_senders, broker_queues, caplog
):
    first = utcnow() - timedelta(minutes=5)  # the selection's order is by scheduled time
    unknown = make_match(status="inprogress", scheduled=first, listener_start_settings={"no_such_setting": 1})
    invalid = make_match(
        status="inprogress",
        scheduled=first + timedelta(seconds=1),
        listener_start_settings={"listener_max_bad_lines": "abc"},
    )
    not_object = make_match(status="inprogress", scheduled=first + timedelta(seconds=2))
    from models.db import database

    database.execute_sql(
        "UPDATE matches SET listener_start_settings = '[1, 2]'::jsonb WHERE id = %s", (str(not_object.id),)
    )
    good = [
        make_match(status="inprogress", scheduled=first + timedelta(minutes=1)),
        make_match(
            status="inprogress",
            scheduled=first + timedelta(minutes=2),
            listener_start_settings={"listener_dry_run": True},
        ),
    ]
    before = set_aside_count("dispatch")
    caplog.set_level(logging.INFO)

    result = dispatch(settings=lsettings, coordination=lcoordination, **real_senders)

    poisoned = [str(m.id) for m in (unknown, invalid, not_object)]
    assert sorted(result.match_ids) == sorted(str(m.id) for m in good)
    assert result.enqueued == 2 and broker_queues("match_listeners") == 2
    reasons = {entry["item"]: entry["reason"] for entry in result.set_aside}
    assert list(reasons) == poisoned
    assert "no_such_setting" in reasons[poisoned[0]]
    assert "listener_max_bad_lines" in reasons[poisoned[1]]
    assert "not an object" in reasons[poisoned[2]]
    for mid in poisoned:
        assert not lcoordination.barriers.is_pending(mid)
    assert all(reload(m).start_message_id is None for m in (unknown, invalid, not_object))
    assert set_aside_count("dispatch") == before + 3
    lines = _set_aside_lines(caplog, "dispatch")
    assert len(lines) == 3 and all(any(mid in line for line in lines) for mid in poisoned)


def test_a_batch_send_that_fails_on_one_message_is_sent_one_by_one_and_only_that_start_is_set_aside(
    make_match, lsettings, lcoordination, real_senders, broker_queues, caplog
):
    first = utcnow() - timedelta(minutes=5)
    bad = make_match(status="inprogress", scheduled=first)
    good = [make_match(status="inprogress", scheduled=first + timedelta(minutes=n)) for n in (1, 2, 3)]

    def refuse_bad(message):
        if message.match_id == str(bad.id):
            raise ValueError("message too large for the broker")

    def send(message):
        refuse_bad(message)
        real_senders["send"](message)

    def send_batch(messages):
        for message in messages:
            refuse_bad(message)  # the real batch sender would fail as a whole on that message
        real_senders["send_batch"](messages)

    before = set_aside_count("dispatch")
    caplog.set_level(logging.INFO)
    result = dispatch(settings=lsettings, coordination=lcoordination, send=send, send_batch=send_batch)

    assert sorted(result.match_ids) == sorted(str(m.id) for m in good)
    assert broker_queues("match_listeners") == 3
    [entry] = result.set_aside
    assert entry["item"] == str(bad.id) and "ValueError: message too large" in entry["reason"]
    assert result.failed == 1 and not lcoordination.barriers.is_pending(bad.id)
    assert set_aside_count("dispatch") == before + 1
    assert len(_set_aside_lines(caplog, "dispatch")) == 1


def test_a_failed_batch_send_to_a_broker_that_is_down_is_not_retried_one_by_one(
    make_match, lsettings, lcoordination
):
    from config.errors import RedisUnavailable

    matches = [make_match(status="inprogress") for _ in range(3)]
    calls = []

    def down(*args):
        calls.append(args)
        raise RedisUnavailable(service="Redis", setting="BROKER_URL", address="x", reason="refused")

    result = dispatch(settings=lsettings, coordination=lcoordination, send=down, send_batch=down)
    assert len(calls) == 1 and result.failed == 3 and result.set_aside == []
    assert not any(lcoordination.barriers.is_pending(m.id) for m in matches)


@pytest.mark.services  # a private redis-server as the broker
def test_a_full_broker_redis_fails_the_batch_as_an_outage_and_sets_no_match_aside(
    make_match, lsettings, lcoordination, actor_runtime, tmp_path
):
    """Redis at maxmemory (noeviction) refuses every write: not one bad message per match."""
    from actors.listeners import send_start, send_starts
    from harness.private_redis import PrivateRedis

    matches = [make_match(status="inprogress") for _ in range(3)]
    with PrivateRedis(tmp_path / "redis") as private:
        actor_runtime(lsettings.model_copy(update={"broker_url": private.url()}))
        client = redis.Redis(port=private.port)
        client.config_set("maxmemory", "1mb")
        client.config_set("maxmemory-policy", "noeviction")
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            for n in range(1000):
                client.set(f"fill{n}", "x" * 10_000)
        before = set_aside_count("dispatch")
        result = dispatch(
            settings=lsettings, coordination=lcoordination, send=send_start, send_batch=send_starts
        )
        client.close()
    assert result.failed == 3 and result.enqueued == 0 and result.set_aside == []
    assert set_aside_count("dispatch") == before
    assert not any(lcoordination.barriers.is_pending(m.id) for m in matches)


@pytest.mark.services  # a private redis-server as the broker
def test_a_broker_lost_mid_tick_keeps_the_batches_sent_before_and_fails_that_one_and_the_rest(
    make_match, lsettings, lcoordination, actor_runtime, tmp_path, monkeypatch
):
    """The tick's batches (``SEND_BATCH``, 2 here) go through the real sender; the broker's Redis
    stops before the second: the first batch is queued, the other three starts fail and are released."""
    from actors.listeners import send_start, send_starts
    from harness.private_redis import PrivateRedis
    from lifecycle import dispatch as dispatch_module

    monkeypatch.setattr(dispatch_module, "SEND_BATCH", 2)
    matches = [make_match(status="inprogress") for _ in range(5)]
    queued: list[int] = []
    with PrivateRedis(tmp_path / "redis") as private:
        actor_runtime(lsettings.model_copy(update={"broker_url": private.url()}))
        calls: list[int] = []

        def send_batch(messages):
            calls.append(len(messages))
            if len(calls) == 2:  # what the first batch left in the broker, then the broker goes away
                client = redis.Redis(port=private.port)
                queued.append(client.llen(f"{lsettings.broker_namespace}:match_listeners"))
                client.close()
                private.stop()
            send_starts(messages)

        result = dispatch(
            settings=lsettings, coordination=lcoordination, send=send_start, send_batch=send_batch
        )
    assert calls == [2, 2] and queued == [2]  # the third batch is not tried
    assert result.enqueued == 2 and result.failed == 3 and result.set_aside == []
    sent = set(result.match_ids)
    assert all(lcoordination.barriers.is_pending(m.id) is (str(m.id) in sent) for m in matches)


def test_a_start_whose_stored_settings_are_not_an_object_is_a_counted_settings_failure(
    make_match, lsettings, lcoordination, services
):
    from lifecycle.errors import ListenerStartSettingsError
    from models.db import database
    from tests.lifecycle.helpers import rows_of, start

    match = make_match(status="inprogress")
    database.execute_sql(
        "UPDATE matches SET listener_start_settings = '\"fast\"'::jsonb WHERE id = %s", (str(match.id),)
    )
    with pytest.raises(ListenerStartSettingsError, match="not an object"):
        start(match, settings=lsettings, coordination=lcoordination, services=services)
    assert lcoordination.barriers.attempts(match.id) == 1 and rows_of(match) == []


# -- schedule and league refresh -------------------------------------------------------------

SCHEDULE_PATH = "/nfl/trial/games/2030/REG/1/schedule.json"


def _game(sr_id: str, **fields):
    return {"id": sr_id, "scheduled": "2030-09-08T17:00:00+00:00", "status": "scheduled", **fields}


def test_a_schedule_refresh_sets_aside_malformed_games_and_upserts_the_games_after_them(
    static_feed, lsettings, db, caplog
):
    from lifecycle.schedule import refresh
    from models import Match

    poisoned = [
        _game("sr:match:bad-time", scheduled="not a time"),
        "a string, not a game",
        {"scheduled": "2030-09-08T17:00:00+00:00"},  # no id
        {"id": "sr:match:new-without-time", "status": "scheduled"},
        _game("sr:match:bad-title", title={"text": "not a string"}),
        _game("sr:match:surrogate-title", title="\ud800x"),  # valid JSON, not UTF-8: PostgreSQL refuses it
    ]
    good = [_game("sr:match:good-1"), _game("sr:match:good-2", away={"alias": "NYJ"}, home={"alias": "BUF"})]
    url = static_feed({SCHEDULE_PATH: {"week": {"games": [*poisoned, *good]}}})
    before = set_aside_count("schedule refresh")
    caplog.set_level(logging.INFO)

    result = refresh(
        lsettings.model_copy(update={"sportradar_base_url": url}), league="nfl", path=SCHEDULE_PATH
    )

    assert (result.seen, result.created, result.updated, result.set_aside) == (8, 2, 0, 6)
    assert sorted(m.sr_id for m in Match.select()) == ["sr:match:good-1", "sr:match:good-2"]
    assert Match.get(Match.sr_id == "sr:match:good-2").title == "NYJ @ BUF"
    assert set_aside_count("schedule refresh") == before + 6
    _assert_lines_say(
        _set_aside_lines(caplog, "schedule refresh"),
        ("sr:match:bad-time", "not an ISO 8601 time"),
        ("game #1", "not an object"),
        ("game #2", "no id"),
        ("sr:match:new-without-time", "no scheduled time"),
        ("sr:match:bad-title", "title is a JSON dict"),
        ("sr:match:surrogate-title", "title is not valid UTF-8"),
    )


def test_a_league_refresh_sets_aside_malformed_teams_and_seasons_and_stores_the_others(
    static_feed, lsettings, db, caplog
):
    from lifecycle.league_refresh import refresh_league_seasons, refresh_league_teams
    from models import Season, Team

    league = {"id": "nfl-league-id", "name": "National Football League", "alias": "NFL"}
    teams = [
        {"id": "t-no-name"},
        ["not", "a", "team"],
        {"id": "t-nul", "name": "Bi\x00lls"},
        {"id": "t-dict", "name": {"en": "Bills"}},
        {"id": "t-bills", "name": "Bills", "market": "Buffalo", "alias": "BUF"},
    ]
    seasons = [
        {"id": "s-bad-date", "year": 2030, "type": "REG", "start_date": "September"},
        {"id": "s-no-type", "year": 2030},
        {"id": "s-2030", "year": 2030, "type": "REG", "start_date": "2030-09-05", "end_date": "2031-01-05"},
    ]
    url = static_feed(
        {
            "/nfl/trial/league/teams.json": {"league": league, "teams": teams},
            "/nfl/trial/league/seasons.json": {"league": league, "seasons": seasons},
        }
    )
    settings = lsettings.model_copy(update={"sportradar_base_url": url})
    before = set_aside_count("league refresh")
    caplog.set_level(logging.INFO)

    assert refresh_league_teams(settings, league="nfl").created == 1
    assert refresh_league_seasons(settings, league="nfl").created == 1

    assert [t.sr_id for t in Team.select()] == ["t-bills"]
    assert [s.sr_id for s in Season.select()] == ["s-2030"]
    assert Team.get(Team.sr_id == "t-bills").name == "Bills"
    assert set_aside_count("league refresh") == before + 6
    _assert_lines_say(
        _set_aside_lines(caplog, "league refresh"),
        ("team t-no-name",),
        ("team #1",),
        ("team t-nul", "name contains a NUL character"),
        ("team t-dict", "name is a JSON dict"),
        ("season s-bad-date",),
        ("season s-no-type",),
    )
