"""resolve_listener_environment: Layer B (call overrides > Match.listener_start_settings) over Layer A."""

from __future__ import annotations

import pytest

from config.errors import ListenerStartSettingsError
from lifecycle.start import resolve_listener_environment, validate_override_keys


def _match(make_match, **stored):
    from tests.lifecycle.helpers import reload

    m = make_match(league="mlb", sr_id="sr:match:424242", listener_start_settings=stored)
    return reload(m)


def test_call_overrides_beat_match_settings_which_beat_the_environment(make_match, monkeypatch):
    monkeypatch.setenv("LISTENER_SR_ENV", "from-env")
    monkeypatch.setenv("LISTENER_MAX_CONSECUTIVE_HEARTBEATS", "7")
    monkeypatch.setenv("LISTENER_STATUS_RELOAD_HEARTBEATS", "9")
    match = _match(make_match, listener_sr_env="from-match", listener_max_consecutive_heartbeats=8)
    env = resolve_listener_environment(match, {"listener_sr_env": "from-call"})
    assert env.listener_sr_env == "from-call"
    assert env.listener_max_consecutive_heartbeats == 8
    assert env.listener_status_reload_heartbeats == 9


def test_the_environment_beats_field_defaults(make_match, monkeypatch):
    monkeypatch.setenv("LISTENER_SKIP_PROCESSING", "true")
    assert resolve_listener_environment(_match(make_match)).listener_skip_processing is True


def test_sr_id_and_league_name_are_injected(make_match):
    env = resolve_listener_environment(_match(make_match))
    assert env.listener_sr_request_match_uuid == "sr:match:424242"
    assert env.listener_sr_url_league == "mlb"


def test_injected_fields_yield_to_call_overrides_only(make_match):
    match = _match(make_match, listener_sr_url_league="from-match")
    assert resolve_listener_environment(match).listener_sr_url_league == "mlb"
    env = resolve_listener_environment(match, {"listener_sr_url_league": "nfl"})
    assert env.listener_sr_url_league == "nfl"


def test_metadata_keys_are_stripped_before_validation(make_match):
    # message_id is no listener setting: left in, validation would refuse it as unknown.
    with pytest.raises(ListenerStartSettingsError, match="message_id"):
        validate_override_keys({"message_id": "x"})
    match = _match(make_match, message_id="start-match-listener.x.y", listener_test_exit_code=3)
    env = resolve_listener_environment(match, {"message_id": "ignored"})
    assert env.listener_test_exit_code == 3  # the stored settings around it still apply
    assert "message_id" not in env.model_dump()


@pytest.mark.parametrize("where", ["call-overrides", "match-settings"])
def test_unknown_keys_raise_listener_start_settings_error(make_match, where):
    stored = {"listener_no_such": 1} if where == "match-settings" else {}
    overrides = {"listener_no_such": 1} if where == "call-overrides" else None
    with pytest.raises(ListenerStartSettingsError, match="listener_no_such"):
        resolve_listener_environment(_match(make_match, **stored), overrides)


def test_an_invalid_value_raises_listener_start_settings_error(make_match):
    with pytest.raises(ListenerStartSettingsError, match="listener_heartbeat_interval_seconds"):
        resolve_listener_environment(_match(make_match), {"listener_heartbeat_interval_seconds": -1})
