"""Models on real PostgreSQL: aware UTC times, status methods, questions, lifecycle rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from config.errors import NaiveDatetimeError
from models import Badge, Match, MatchListenerRecord, Question


def test_a_naive_datetime_is_refused_by_a_timestamp_column(make_match):
    with pytest.raises(NaiveDatetimeError):
        make_match(scheduled=datetime(2024, 5, 21, 18, 0))


def test_times_come_back_as_aware_utc_whatever_offset_went_in(make_match):
    paris = timezone(timedelta(hours=2))
    match = make_match(scheduled=datetime(2024, 5, 21, 20, 0, tzinfo=paris))
    stored = Match.get_by_id(match.id).scheduled
    assert stored == datetime(2024, 5, 21, 18, 0, tzinfo=UTC)
    assert stored.tzinfo == UTC


def test_a_match_defaults_to_auto_dispatch_and_empty_start_settings(make_match):
    match = Match.get_by_id(make_match().id)
    assert match.auto_dispatch_listener is True
    assert match.listener_start_settings == {}
    assert match.status == "scheduled"
    assert match.is_test is False


def test_start_settings_metadata_keys_are_stripped(make_match):
    match = make_match(
        listener_start_settings={"message_id": "m", "celery_task_id": "t", "listener_dry_run": True}
    )
    assert match.start_settings_without_metadata() == {"listener_dry_run": True}


def test_the_stream_status_is_written_through_the_rules(make_match):
    match = make_match(status="scheduled")
    assert match.apply_stream("scheduled") == "scheduled"
    assert match.apply_stream("inprogress") == "inprogress"
    assert match.apply_stream("complete") == "complete"
    assert match.apply_stream("inprogress") == "complete"
    assert Match.get_by_id(match.id).status == "complete"


def test_a_refresh_heals_a_leftover_with_in_game_questions(make_match, frozen_clock):
    match = make_match(status="scheduled", scheduled=frozen_clock.now - timedelta(days=7))
    assert match.apply_refresh("scheduled") == "scheduled"  # no questions yet: trust SR
    Question.create(match=match, key="q1", prompt="Next at-bat a hit?", in_game=True)
    assert match.apply_refresh("scheduled") == "inprogress"
    stored = Match.get_by_id(match.id)
    assert (stored.status, stored.sr_status) == ("inprogress", "scheduled")
    assert stored.refreshed_at == frozen_clock.now


def test_pregame_questions_do_not_trigger_the_heal(make_match, frozen_clock):
    match = make_match(status="scheduled", scheduled=frozen_clock.now - timedelta(days=1))
    Question.create(match=match, key="pre", prompt="Who wins?", in_game=False)
    assert match.apply_refresh("scheduled") == "scheduled"


def test_a_refresh_never_rewinds_a_live_match(make_match):
    match = make_match(status="inprogress")
    assert match.apply_refresh("scheduled") == "inprogress"
    assert Match.get_by_id(match.id).status == "inprogress"


def test_a_lifecycle_row_derives_its_badge(make_match, frozen_clock):
    match = make_match()
    row = MatchListenerRecord.create(match=match, message_id="start-match-listener.x.y")
    assert row.badge(stale_after_seconds=180) is Badge.RUNNING
    frozen_clock.advance(seconds=181)
    assert row.badge(stale_after_seconds=180) is Badge.STALE
    row.ended_at, row.exit_code = frozen_clock.now, 14
    row.save()
    assert MatchListenerRecord.get_by_id(row.id).badge(stale_after_seconds=180) is Badge.ABANDONED


def test_the_dispatch_and_open_row_indexes_exist(db):
    from models.db import database

    names = {r[0] for r in database.execute_sql("SELECT indexname FROM pg_indexes").fetchall()}
    assert {"matches_dispatch_idx", "match_listener_records_open_idx"} <= names


def test_a_stale_read_cannot_rewind_a_status_the_refresh_just_wrote(make_match):
    match = make_match(status="inprogress")
    stale = Match.get_by_id(match.id)  # a listener read the match before the refresh ran
    assert Match.get_by_id(match.id).apply_refresh("closed") == "closed"
    assert stale.apply_stream("halftime") == "closed"  # its write lost the race: re-read, never reopened
    assert Match.get_by_id(match.id).status == "closed"
    assert stale.status == "closed"


def test_a_stale_read_still_moves_a_status_forward_from_what_is_stored(make_match):
    match = make_match(status="inprogress")
    stale = Match.get_by_id(match.id)
    assert Match.get_by_id(match.id).apply_stream("complete") == "complete"
    assert stale.apply_stream("closed") == "closed"  # a later terminal status still applies
    assert Match.get_by_id(match.id).status == "closed"


@pytest.mark.services
def test_the_start_message_id_moves_out_of_the_settings_json(settings):
    from yoyo import get_backend, read_migrations

    from models.migrate import MIGRATIONS_DIR, drop_database, ensure_database, migrate

    url = f"{settings.database_url}_upgrade"
    ensure_database(url)
    try:
        backend = get_backend(url)
        older = read_migrations(str(MIGRATIONS_DIR)).filter(lambda m: m.id < "0011")
        with backend.lock():
            backend.apply_migrations(backend.to_apply(older))
        cursor = backend.connection.cursor()
        cursor.execute("INSERT INTO leagues (name) VALUES ('nfl') RETURNING id")
        [league_id] = cursor.fetchone()
        for n, stored in enumerate(['{"message_id": "m-1", "listener_dry_run": true}', "{}"]):
            cursor.execute(
                "INSERT INTO matches (id, sr_id, league_id, scheduled, listener_start_settings) "
                "VALUES (gen_random_uuid(), %s, %s, now(), %s::jsonb)",
                (f"sr:{n}", league_id, stored),
            )
        backend.connection.commit()
        backend.connection.close()
        assert "0011_start_message_id" in migrate(url).applied
        backend = get_backend(url)
        cursor = backend.connection.cursor()
        cursor.execute("SELECT sr_id, start_message_id, listener_start_settings FROM matches ORDER BY sr_id")
        assert cursor.fetchall() == [("sr:0", "m-1", {"listener_dry_run": True}), ("sr:1", None, {})]
        backend.connection.close()
    finally:
        drop_database(url)
