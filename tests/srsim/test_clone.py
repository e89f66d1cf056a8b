"""kickoff sim clone: a recorded match becomes an is_test clone whose script replays its events."""

from __future__ import annotations

import json
import uuid

import pytest

from lifecycle.clone import clone_match
from models import Match
from models.errors import MatchNotFound
from srsim.script import load_script
from tests.logged import event_log_of
from tests.waiting import wait_for


def test_a_recorded_match_is_cloned_into_an_is_test_match_and_a_replay_script(make_match, tmp_path):
    source = make_match("nhl", sr_id=str(uuid.uuid4()), status="closed", title="STL @ NSH")
    archive = event_log_of(source.id)
    sent = [
        {
            "payload": {"game": {"id": source.sr_id, "status": "inprogress"}, "event": {"id": f"e{i}"}},
            "metadata": {"match": f"sd:match:{source.sr_id}", "operation": "create"},
        }
        for i in range(5)
    ]
    for e in sent:
        archive.record(e)
    archive.append_marker("delay", status="delayed")
    archive.close()

    clone, script, count = clone_match(source.sr_id, data_dir=tmp_path, start_after=1, event_interval=0.1)

    assert count == 5  # the kickoff marker is not replayed
    row = Match.get_by_id(clone.id)
    assert (
        row.is_test and row.status == "scheduled" and row.league.name == "nhl" and row.sr_id != source.sr_id
    )
    [game] = load_script(script)
    envelopes = game.envelopes(row.scheduled)
    assert [e["payload"]["event"]["id"] for e in envelopes] == [f"e{i}" for i in range(5)]
    assert {e["metadata"]["match"] for e in envelopes} == {f"sd:match:{row.sr_id}"}
    assert json.loads(script.read_text())["games"][0]["is_test"] is True


def test_cloning_an_unknown_match_is_not_found(db, tmp_path):
    with pytest.raises(MatchNotFound):
        clone_match("nope", data_dir=tmp_path)


def _recorded(make_match, data_dir, events: int = 4):
    source = make_match("mlb", sr_id=str(uuid.uuid4()), status="closed", title="HOU @ KC")
    archive = event_log_of(source.id)
    for i in range(events):
        archive.record(
            {
                "payload": {"game": {"id": source.sr_id, "status": "inprogress"}, "event": {"id": f"e{i}"}},
                "metadata": {"match": f"sd:match:{source.sr_id}", "operation": "create"},
            }
        )
    archive.close()
    return source


def _dispatchable(settings) -> set[str]:
    from lifecycle.dispatch_selection import find_upcoming_matches_needing_listeners

    return set(
        find_upcoming_matches_needing_listeners(
            within_minutes=10,
            is_test=True,
            active_max_age_seconds=settings.listener_active_max_age_seconds,
            stale_seconds=settings.listener_heartbeat_stale_seconds,
        )
    )


def test_a_clone_stores_its_settings_and_bad_ones_are_refused_before_anything_is_written(
    make_match, tmp_path
):
    from lifecycle.errors import ListenerStartSettingsError

    source = _recorded(make_match, tmp_path)
    clone, _, _ = clone_match(source.sr_id, data_dir=tmp_path, settings={"listener_force_exit_code": 11})
    stored = Match.get_by_id(clone.id).listener_start_settings
    assert stored["listener_force_exit_code"] == 11
    assert Match.get_by_id(clone.id).start_settings_without_metadata() == {"listener_force_exit_code": 11}
    before = Match.select().count()
    with pytest.raises(ListenerStartSettingsError, match="no_such_setting"):
        clone_match(source.sr_id, data_dir=tmp_path, settings={"no_such_setting": 1})
    with pytest.raises(ListenerStartSettingsError, match="listener_force_exit_code"):
        clone_match(source.sr_id, data_dir=tmp_path, settings={"listener_force_exit_code": "eleven"})
    for key in ("sportradar_base_url", "listener_body", "data_dir"):
        with pytest.raises(ListenerStartSettingsError, match=f"refused listener setting.*{key}"):
            clone_match(source.sr_id, data_dir=tmp_path, settings={key: "x"})
    assert Match.select().count() == before


def test_sim_clone_setting_on_the_command_line(make_match, tmp_path, test_env, monkeypatch):
    from click.testing import CliRunner

    from cli.main import cli

    for key, value in {**test_env, "DATA_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(key, value)
    source = _recorded(make_match, tmp_path)
    runner = CliRunner()
    ok = runner.invoke(
        cli, ["sim", "clone", source.sr_id, "--setting", "listener_force_exit_code=11", "--json"]
    )
    assert ok.exit_code == 0, ok.output
    out = json.loads(ok.output)
    assert out["settings"] == {"listener_force_exit_code": 11}
    assert Match.get_by_id(out["match_id"]).listener_start_settings["listener_force_exit_code"] == 11
    for bad, word in (("nope=1", "nope"), ("listener_force_exit_code=x", "listener_force_exit_code")):
        refused = runner.invoke(cli, ["sim", "clone", source.sr_id, "--setting", bad])
        assert refused.exit_code == 3 and word in refused.output
        assert len(refused.output.strip().splitlines()) == 1, refused.output


def test_sim_clone_names_its_source_by_internal_id_or_by_a_uuid_sr_id(
    make_match, tmp_path, test_env, monkeypatch
):
    from click.testing import CliRunner

    from cli.main import cli

    for key, value in {**test_env, "DATA_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(key, value)
    source = _recorded(make_match, tmp_path)
    assert str(uuid.UUID(source.sr_id)) == source.sr_id != str(source.id)
    runner = CliRunner()
    for ref in (str(source.id), source.sr_id):
        done = runner.invoke(cli, ["sim", "clone", ref, "--json"])
        assert done.exit_code == 0, done.output
        clone = Match.get_by_id(json.loads(done.output)["match_id"])
        assert clone.title == f"clone of {source.title or source.sr_id}" and clone.is_test


def test_a_clone_is_served_by_a_running_srsim_without_a_restart_and_dispatchable_only_then(
    make_match, tmp_path, settings
):
    import requests

    from srsim.server import SimServer
    from srsim.status import StatusWriter

    watch = tmp_path / "srsim"
    other = SimServer([], heartbeat_seconds=0.1, watch_dir=None).start_background()  # not watching
    writer = StatusWriter()
    server = SimServer([], heartbeat_seconds=0.1, status_writer=writer, watch_dir=watch, watch_seconds=0.1)
    server.start_background()
    try:
        source = _recorded(make_match, tmp_path)
        clone, script, _ = clone_match(source.sr_id, data_dir=tmp_path, start_after=1, event_interval=0.1)
        assert script.parent == watch
        assert str(clone.id) not in _dispatchable(settings)  # not served yet: not dispatched

        wait_for(lambda: clone.sr_id in writer.served, timeout=30, what="the clone served")
        assert clone.sr_id in writer.served and clone.sr_id in server.sessions
        assert clone.sr_id not in other.sessions
        assert str(clone.id) in _dispatchable(settings)
        row = Match.get_by_id(clone.id)
        assert row.scheduled == server.sessions[clone.sr_id].scheduled
        assert "srsim_unserved" not in row.listener_start_settings
        url = f"{server.base_url}/mlb/trial/stream/en/events/subscribe?match=sd:match:{clone.sr_id}"
        with requests.get(url, stream=True, timeout=5) as resp:
            assert resp.status_code == 200
    finally:
        server.stop()
        other.stop()
        writer.close()


def test_scripts_already_in_the_watched_directory_are_not_replayed(make_match, tmp_path):
    from srsim.server import SimServer

    source = _recorded(make_match, tmp_path)
    old, _, _ = clone_match(source.sr_id, data_dir=tmp_path)
    server = SimServer([], watch_dir=tmp_path / "srsim", watch_seconds=0.05).start_background()
    try:
        new, _, _ = clone_match(source.sr_id, data_dir=tmp_path)
        wait_for(lambda: new.sr_id in server.sessions, timeout=30, what="the new script served")
        assert new.sr_id in server.sessions and old.sr_id not in server.sessions
    finally:
        server.stop()


def _message(sr_id: str, event: dict, operation: str = "create", **extra) -> dict:
    return {
        "payload": {"game": {"id": sr_id}, "event": event},
        "metadata": {"match": f"sd:match:{sr_id}", "operation": operation},
        **extra,
    }


@pytest.mark.unit
def test_a_replay_holds_each_event_once_in_its_current_state_where_it_first_came():
    from lifecycle.clone import replay_messages

    sr = "g1"
    archive = [
        _message(sr, {"id": "a", "updated_at": "2026-01-01T00:00:01Z", "x": 1}),
        {"kickoff": {"marker": "delay"}},
        _message(sr, {"id": "b", "updated_at": "2026-01-01T00:00:02Z"}),
        {"payload": {"game": {"id": sr, "status": "inprogress"}}},  # no event: kept where it is
        _message(sr, {"id": "a", "updated_at": "2026-01-01T00:00:05Z", "x": 2}, "update"),
        _message(sr, {"id": "c"}, kickoff={"backfilled": "play_by_play"}),
        _message(sr, {"id": "b", "deleted": "2026-01-01T00:00:06Z"}, "delete"),
    ]
    replay = replay_messages(archive)
    ids = [(m["payload"].get("event") or {}).get("id") for m in replay]
    assert ids == ["a", None, "c"]
    assert replay[0]["payload"]["event"]["x"] == 2 and replay[0]["metadata"]["operation"] == "create"
    assert all("kickoff" not in m for m in replay)
