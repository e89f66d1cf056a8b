"""A row or match the sweep cannot handle is set aside with its reason; the sweep goes on (real services)."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from config.set_aside import set_aside_count as set_aside_counted
from lifecycle.cleanup import sweep_stale_match_listeners
from models.listener_record import MatchListenerRecord
from tests.lifecycle.helpers import dead_run, poisoned_and_good_runs


def set_aside_count() -> float:
    return set_aside_counted("sweep")


def assert_cleaned(goods, coordination) -> None:
    for match in goods:
        assert coordination.locks.start_lock_holder(match.id) is None
        assert (
            not coordination.barriers.is_pending(match.id) and coordination.barriers.attempts(match.id) == 0
        )


def test_a_poisoned_row_first_is_set_aside_and_the_good_rows_after_it_are_still_cleaned(
    make_match, lsettings, lcoordination, redis_client, caplog
):
    poisoned, poisoned_row, goods = poisoned_and_good_runs(make_match, lcoordination, redis_client)
    before = set_aside_count()
    with caplog.at_level(logging.WARNING, logger="config.set_aside"):
        result = sweep_stale_match_listeners(settings=lsettings, coordination=lcoordination)

    assert result.abandoned == 4 and set(result.matches) == {str(m.id) for m in [poisoned, *goods]}
    assert_cleaned(goods, lcoordination)
    assert {str(m.id) for m in goods} <= set(result.barriers_cleared)
    [item] = result.set_aside
    assert (item.step, item.match_id, item.record_id) == (
        "release_start_lock",
        str(poisoned.id),
        poisoned_row,
    )
    assert "WRONGTYPE" in item.reason
    assert set_aside_count() == before + 1
    lines = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert len(lines) == 1 and str(poisoned.id) in lines[0] and poisoned_row in lines[0]
    # The poisoned key is left as it was (an operator's to look at); its row is closed like the others.
    assert redis_client.type(lcoordination.start_lock_key(poisoned.id)) == b"hash"
    assert MatchListenerRecord.get_by_id(poisoned_row).exit_code == 14


def test_an_unreadable_lease_epoch_is_set_aside_and_stale_rows_are_still_swept(
    kick, make_match, lcoordination, redis_client
):
    """The lease judgement is one step: when it cannot run, the heartbeat sweep still does (via the CLI)."""
    match = make_match(status="inprogress")
    record_id = dead_run(match, lcoordination, age_seconds=600)
    MatchListenerRecord.update(worker_lease=str(uuid.uuid4())).where(
        MatchListenerRecord.id == record_id
    ).execute()
    redis_client.set(lcoordination.epoch_key, "not-an-epoch")
    try:
        before = set_aside_count()
        out = json.loads(kick("listeners", "sweep", "--json").stdout)
    finally:
        redis_client.delete(lcoordination.epoch_key)
    assert out["abandoned"] == 1 and out["matches"] == [str(match.id)]
    [item] = out["set_aside"]
    assert item["step"] == "judge_worker_leases" and item["match_id"] is None and item["reason"]
    assert set_aside_count() == before + 1
    assert_cleaned([match], lcoordination)


@pytest.mark.parametrize("output", ["text", "json"])
def test_the_sweep_command_names_what_it_set_aside(kick, make_match, lcoordination, redis_client, output):
    poisoned, poisoned_row, goods = poisoned_and_good_runs(make_match, lcoordination, redis_client, good=1)
    args = ("listeners", "sweep") + (("--json",) if output == "json" else ())
    printed = kick(*args).stdout
    if output == "json":
        [item] = json.loads(printed)["set_aside"]
        assert item["match_id"] == str(poisoned.id) and item["record_id"] == poisoned_row
    else:
        assert "1 set aside" in printed
        assert f"set aside at release_start_lock: match {poisoned.id} row {poisoned_row}" in printed
    assert_cleaned(goods, lcoordination)
