"""lifecycle.set_aside: an item's error sets it aside (kept, counted); an outage is not an item's fault."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from config.errors import RedisUnavailable
from lifecycle.set_aside import SetAside, setting_aside

METRIC = "kickoff_lifecycle_items_set_aside_total"


def test_an_items_error_is_kept_with_its_reason_counted_and_not_raised():
    aside: list[SetAside] = []
    before = REGISTRY.get_sample_value(METRIC, {"step": "unit_step"}) or 0.0
    for n in range(3):
        with setting_aside(aside, step="unit_step", match_id=f"m{n}", record_id=f"r{n}"):
            if n == 0:
                raise ValueError("bad value in item 0")
    assert aside == [SetAside("unit_step", "m0", "r0", "ValueError: bad value in item 0")]
    assert REGISTRY.get_sample_value(METRIC, {"step": "unit_step"}) == before + 1


def test_a_service_that_does_not_answer_ends_the_loop():
    aside: list[SetAside] = []
    down = RedisUnavailable(service="Redis", setting="REDIS_URL", address="redis://x", reason="refused")
    with pytest.raises(RedisUnavailable), setting_aside(aside, step="unit_outage", match_id="m"):
        raise down
    assert aside == []
