"""config.set_aside: an item's error sets it aside (kept, counted, logged); an outage ends the loop."""

from __future__ import annotations

import logging

import pytest

from config.errors import RedisUnavailable
from config.set_aside import SetAside, set_aside_count, setting_aside


def test_an_items_error_is_kept_with_its_reason_counted_logged_once_and_not_raised(caplog):
    aside: list[SetAside] = []
    before = set_aside_count("unit loop")
    with caplog.at_level(logging.WARNING, logger="config.set_aside"):
        for n in range(3):
            with setting_aside(aside, loop="unit loop", item=f"row r{n}", step="a step", match_id=f"m{n}"):
                if n == 0:
                    raise ValueError("bad value in item 0")
    assert aside == [
        SetAside("unit loop", "row r0", "ValueError: bad value in item 0", step="a step", match_id="m0")
    ]
    assert aside[0].as_dict() == {
        "loop": "unit loop",
        "item": "row r0",
        "reason": "ValueError: bad value in item 0",
        "step": "a step",
        "match_id": "m0",
    }
    assert set_aside_count("unit loop") == before + 1
    [line] = [r.getMessage() for r in caplog.records]
    assert line == "unit loop: row r0 set aside at a step: ValueError: bad value in item 0"


def test_a_service_that_does_not_answer_ends_the_loop():
    aside: list[SetAside] = []
    down = RedisUnavailable(service="Redis", setting="REDIS_URL", address="redis://x", reason="refused")
    with pytest.raises(RedisUnavailable), setting_aside(aside, loop="unit outage", item="m"):
        raise down
    assert aside == []
