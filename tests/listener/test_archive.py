"""The event archive: valid JSON after every flush, appends across restarts, repair, safe paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from listener.archive import EventArchive, TextLog, archive_path, read_events, shortcode_for
from listener.errors import ArchivePathError


def _events(n: int, start: int = 0) -> list[dict]:
    return [{"payload": {"event": {"id": f"e{i}", "text": "line\nbreak é"}}} for i in range(start, start + n)]


def test_the_archive_is_valid_json_after_every_flush_and_across_reopens(tmp_path: Path):
    path = archive_path(tmp_path, "mlb", shortcode_for("sr:match:1"))
    archive = EventArchive(path, flush_events=1000).open()
    assert json.loads(path.read_bytes()) == []
    for e in _events(3):
        archive.append(e)
    archive.flush()
    assert json.loads(path.read_bytes()) == _events(3)
    archive.close()
    again = EventArchive(path).open()
    assert again.count == 3 and not again.repaired
    for e in _events(2, start=3):
        again.append(e)
    again.close()
    assert json.loads(path.read_bytes()) == _events(5)


@pytest.mark.parametrize("cut", [1, 7, 20, 40], ids=lambda c: f"cut-{c}-bytes-from-the-end")
def test_a_file_cut_mid_write_is_repaired_losing_at_most_the_partial_event(tmp_path: Path, cut: int):
    path = tmp_path / "listener" / "mlb" / "m.json"
    archive = EventArchive(path, flush_events=1).open()
    for e in _events(4):
        archive.append(e)
    archive.close()
    data = path.read_bytes()
    path.write_bytes(data[:-2] + b',{"payload":{"event":{"id":"e4","text":"par')  # a write cut by kill -9
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) - cut])
    reopened = EventArchive(path).open()
    assert reopened.repaired
    assert reopened.count == 4
    reopened.append({"payload": {"event": {"id": "new"}}})
    reopened.close()
    assert json.loads(path.read_bytes()) == [*_events(4), {"payload": {"event": {"id": "new"}}}]


def test_read_events_tolerates_a_file_cut_mid_write(tmp_path: Path):
    path = tmp_path / "a.json"
    path.write_bytes(b'[\n{"a":1}\n,{"b":2}\n,{"c":')
    assert read_events(path) == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize(
    ("league", "shortcode"),
    [
        ("../../etc", "m1"),
        ("mlb", "../../../tmp/evil"),
        ("mlb/../..", "m1"),
        ("mlb", "..\\..\\evil"),
        ("", "m1"),
        ("mlb", ".hidden"),
        ("mlb", ".."),
        ("mlb", "a" * 200),
        ("ml\x00b", "m1"),
    ],
    ids=[
        "league-dotdot",
        "shortcode-dotdot",
        "league-slashes",
        "shortcode-backslashes",
        "empty-league",
        "dotfile",
        "shortcode-is-dotdot",
        "over-long",
        "nul-byte",
    ],
)
def test_path_traversal_through_league_or_shortcode_is_refused(tmp_path: Path, league: str, shortcode: str):
    with pytest.raises(ArchivePathError):
        archive_path(tmp_path, league, shortcode)
    assert list(tmp_path.iterdir()) == []


def test_harmless_characters_are_sanitised_inside_data_dir(tmp_path: Path):
    path = archive_path(tmp_path, "MLB", shortcode_for("sr:match:42"))
    assert path == (tmp_path / "listener" / "mlb" / "sr_match_42.json").resolve()


def test_the_text_log_is_named_after_the_shortcode_and_record_id(tmp_path: Path):
    path = archive_path(tmp_path, "nfl", "m1")
    path.parent.mkdir(parents=True)
    log = TextLog.for_run(path, "0123456789abcdef")
    log.write("hello %s", "world")
    assert (path.parent / "m1.01234567.log").read_text().strip().endswith("hello world")
    assert TextLog.for_run(path, None).path is None


def test_by_default_every_event_is_on_disk_as_soon_as_it_is_appended(tmp_path: Path, settings):
    path = tmp_path / "mlb" / "live.json"
    archive = EventArchive(path, flush_events=settings.listener_archive_flush_events).open()
    for n in range(3):
        archive.append({"payload": {"n": n}})
        # read through another handle, as a successor would after a kill -9 right now
        assert [e["payload"]["n"] for e in json.loads(path.read_text())] == list(range(n + 1))
