"""Behind pgbouncer in transaction mode: a listener worker and the dispatch CLI whose only way to PostgreSQL
is a private pgbouncer (5 server connections) run the lifecycle: dispatch, start, heartbeats, stop."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.private_pgbouncer import PrivatePgbouncer
from models.listener_record import MatchListenerRecord
from tests.lifecycle.helpers import open_rows, rows_of
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def bouncer():
    # Not under tmp_path: pgbouncer runs as the postgres user, which cannot enter pytest's 0700 dirs.
    workdir = Path(tempfile.mkdtemp(prefix="kickoff-pgbouncer-"))
    try:
        with PrivatePgbouncer(workdir, pool_size=5) as b:
            yield b
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_the_lifecycle_runs_with_every_worker_and_cli_connection_through_pgbouncer_in_transaction_mode(
    make_match, lsettings, lcoordination, start_worker, subprocess_env, lifecycle_env, bouncer
):
    from lifecycle.cleanup import stop_match_listener

    db_name = lsettings.database_url.rsplit("/", 1)[1]
    via_bouncer = {"DATABASE_URL": bouncer.url(db_name)}
    matches = [make_match(status="inprogress") for _ in range(3)]
    start_worker(threads=4, env=via_bouncer)
    kickoff = str(Path(sys.executable).parent / "kickoff")
    done = subprocess.run(
        [kickoff, "listeners", "dispatch", "--json"],
        env={**subprocess_env, **lifecycle_env, **via_bouncer},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"enqueued": 3' in done.stdout
    rows = {m.id: wait_for(lambda m=m: open_rows(m), timeout=60)[0] for m in matches}
    for m in matches:  # the heartbeat thread's UPDATEs go through pgbouncer too
        first = rows[m.id].heartbeat_at
        wait_for(lambda m=m, first=first: MatchListenerRecord.get_by_id(rows[m.id].id).heartbeat_at > first)
    stop_match_listener(str(matches[0].id), settings=lsettings, coordination=lcoordination)
    wait_for(lambda: rows_of(matches[0])[0].exit_code == 15, timeout=30)
    assert all(len(open_rows(m)) == 1 for m in matches[1:])
