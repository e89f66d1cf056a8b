"""bench/fleet.py counts the runs that end during its window by kind of reason, not by each match's text."""

from __future__ import annotations

from bench.fleet import reason_kind


def test_reasons_differing_only_in_their_url_and_duration_are_one_kind() -> None:
    first = (
        "feed lost for 128.1 s: cannot connect to http://127.0.0.1:40657/mlb/trial/stream/en/events/"
        "subscribe?match=sd:match:9696c662&format=ndjson&resume_id=3ad5eb8e119ef747.184: ReadTimeout"
    )
    second = (
        "feed lost for 15 s: cannot connect to http://127.0.0.1:41815/mlb/trial/stream/en/events/"
        "subscribe?match=sd:match:5565d359&format=ndjson&resume_id=56551ca0507073ad.182: ReadTimeout"
    )
    assert reason_kind(first) == reason_kind(second) == "feed lost for N s: cannot connect to URL ReadTimeout"


def test_a_reason_of_another_kind_stays_apart_and_plain_text_is_kept() -> None:
    assert reason_kind("game over") == "game over"
    before_live = reason_kind("feed lost before going live: cannot connect to http://x/y: ReadTimeout")
    assert before_live == "feed lost before going live: cannot connect to URL ReadTimeout"
    assert before_live != reason_kind("feed lost for 2.0 s: cannot connect to http://x/y: ReadTimeout")
