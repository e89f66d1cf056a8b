"""resolve_listener_environment: Layer B (call overrides > Match.listener_start_settings) over Layer A."""

from __future__ import annotations

import pytest

from lifecycle.errors import ListenerStartSettingsError
from lifecycle.listener_run import resolve_listener_environment, validate_override_keys


def _match(make_match, **stored):
    from tests.lifecycle.helpers import reload

    m = make_match(league="mlb", sr_id="sr:match:424242", listener_start_settings=stored)
    return reload(m)


def test_call_overrides_beat_match_settings_which_beat_the_environment(make_match, monkeypatch):
    monkeypatch.setenv("LISTENER_READ_TIMEOUT_SECONDS", "11")
    monkeypatch.setenv("LISTENER_MAX_CONSECUTIVE_HEARTBEATS", "7")
    monkeypatch.setenv("LISTENER_STATUS_RELOAD_HEARTBEATS", "9")
    match = _match(make_match, listener_read_timeout_seconds=12, listener_max_consecutive_heartbeats=8)
    env = resolve_listener_environment(match, {"listener_read_timeout_seconds": 13})
    assert env.listener_read_timeout_seconds == 13
    assert env.listener_max_consecutive_heartbeats == 8
    assert env.listener_status_reload_heartbeats == 9


def test_the_environment_beats_field_defaults(make_match, monkeypatch):
    monkeypatch.setenv("LISTENER_SKIP_PROCESSING", "true")
    assert resolve_listener_environment(_match(make_match)).listener_skip_processing is True


def test_sr_id_and_league_name_are_injected(make_match):
    env = resolve_listener_environment(_match(make_match))
    assert env.listener_sr_request_match_uuid == "sr:match:424242"
    assert env.listener_sr_url_league == "mlb"


def test_injected_fields_yield_only_to_the_process_own_run_settings(make_match):
    match = _match(make_match)
    with pytest.raises(ListenerStartSettingsError, match=r"refused listener setting.*listener_sr_url_league"):
        resolve_listener_environment(match, {"listener_sr_url_league": "nfl"})
    env = resolve_listener_environment(match, local={"listener_sr_url_league": "nfl"})
    assert env.listener_sr_url_league == "nfl"


#: Settings of the process environment a run must never set: endpoints, secrets, paths, code.
REFUSED = {
    "sportradar_base_url": "http://elsewhere.example",
    "sportradar_api_key": "k",
    "sentry_dsn": "https://k@elsewhere.example/1",
    "data_dir": "/tmp/elsewhere",
    "job_catalog_path": "/tmp/catalog.yaml",
    "listener_body": "tests.lifecycle.bodies:Exploding",
    "listener_pipeline": "tests.lifecycle.bodies:Exploding",
    "listener_stream_path": "/elsewhere",
    "listener_sr_env": "production",
    "database_url": "postgresql://elsewhere/db",
    "listener_heartbeat_interval_seconds": 5,
}


@pytest.mark.parametrize("key", sorted(REFUSED))
@pytest.mark.parametrize("where", ["call-overrides", "match-settings"])
def test_a_setting_of_the_process_environment_is_refused_per_run_naming_it(make_match, where, key):
    stored = {key: REFUSED[key]} if where == "match-settings" else {}
    overrides = {key: REFUSED[key]} if where == "call-overrides" else None
    with pytest.raises(ListenerStartSettingsError, match=f"refused listener setting.*{key}"):
        resolve_listener_environment(_match(make_match, **stored), overrides)


def test_every_allowed_run_setting_is_a_listener_setting_and_docs_list_exactly_them():
    import re

    from config.settings import REPO_ROOT, MatchListenerEnvironment
    from lifecycle.listener_run import RUN_SETTINGS

    assert set(MatchListenerEnvironment.model_fields) >= RUN_SETTINGS
    text = (REPO_ROOT / "docs" / "lifecycle.md").read_text()
    table = text.split("### Per-run settings", 1)[1].split("Everything else", 1)[0]
    assert set(re.findall(r"`(listener_[a-z_]+)`", table)) == RUN_SETTINGS


@pytest.mark.parametrize("key", ["message_id", "celery_task_id"])
def test_metadata_keys_are_stripped_before_validation(make_match, key):
    # No listener setting: left in, validation would refuse it as unknown.
    with pytest.raises(ListenerStartSettingsError, match=key):
        validate_override_keys({key: "x"})
    match = _match(make_match, **{key: "start-match-listener.x.y"}, listener_test_exit_code=3)
    env = resolve_listener_environment(match, {key: "ignored"})
    assert env.listener_test_exit_code == 3  # the stored settings around it still apply
    assert key not in env.model_dump()


def test_a_match_carrying_the_reserved_celery_task_id_is_dispatched_and_starts_uncounted(
    make_match, ctx, outbox
):
    """The spec's reserved metadata key is stripped, not refused: no set-aside, no failed attempt."""
    from tests.lifecycle.helpers import dispatch, start

    match = make_match(listener_start_settings={"celery_task_id": "start-match-listener.x.y"})
    report = dispatch(settings=ctx["settings"], coordination=ctx["coordination"], send=outbox)
    assert report.enqueued == 1 and [m.match_id for m in outbox.messages] == [str(match.id)]
    ctx["coordination"].barriers.clear_pending(match.id)
    result = start(match, overrides={"listener_force_exit_code": 0}, **ctx)
    assert result.success and result.exit_code == 0
    assert ctx["coordination"].barriers.attempts(match.id) == 0


@pytest.mark.parametrize("where", ["call-overrides", "match-settings"])
def test_unknown_keys_raise_listener_start_settings_error(make_match, where):
    stored = {"listener_no_such": 1} if where == "match-settings" else {}
    overrides = {"listener_no_such": 1} if where == "call-overrides" else None
    with pytest.raises(ListenerStartSettingsError, match="listener_no_such"):
        resolve_listener_environment(_match(make_match, **stored), overrides)


def test_an_invalid_value_raises_listener_start_settings_error(make_match):
    with pytest.raises(ListenerStartSettingsError, match="listener_max_bad_lines"):
        resolve_listener_environment(_match(make_match), {"listener_max_bad_lines": -1})
