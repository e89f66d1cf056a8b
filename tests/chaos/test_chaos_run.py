"""The seeded nemesis in the suite: one 3-minute run of bench/chaos.py over real workers on test hosts.

30 matches on srsim, 3 test hosts (network namespaces, harness/hosts.py) with 2 listener workers
each, the scheduler and a default worker on the host side; kills, pauses, partitions, a Redis
restart, clock skews and deploys from seed ``SEED`` (harness/chaos/schedule.py), then the history
checked (harness/chaos/checker.py): never two streams of one match, no row seen open beside or
written after its successor, every archive equal to srsim's game, every match streaming again
within the bound from the moment it lost its stream. The games outlast the schedule by twice
the bound. About five minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.chaos

#: The run's seed: its schedule holds every kind of fault, partitions both black holes and refusals.
SEED = 62
MINUTES = 3
#: The recovery bound asserted here: the takeover bound (30 s, the bench's default: a lease, its
#: reaper poll, the longest reconnect backoff step a 30 s cut reaches, and a start) plus 10 s for
#: the suite's loaded machine (one lease plus its renewal slack: the bench measured up to 20.3 s
#: on the development machine, docs/reliability.md). The matches the reapers used to leave for
#: the next dispatch tick (findings 2-4) are restarted at once now; one that still waits for a
#: tick (a run younger than a minute that ran out of reconnects) breaks this bound.
BOUND_SECONDS = 40
#: Left out of the suite's schedule: a host cut from the feed keeps its matches (its workers renew
#: their lease) for the whole cut plus the reconnect backoff, so measured from the stream's loss
#: (issue 36's checker) seed 62's feed cuts leave 14 matches 52.8 s without a stream, beyond the
#: bound (docs/reliability.md, finding 5). ``bench/chaos.py`` without ``--without`` still injects them.
WITHOUT = ("partition-feed",)


@pytest.mark.timeout(660)
@pytest.mark.xfail(
    strict=False,
    reason=(
        "open: issue 36's checker finds takeovers that do not hold on every run of seed 62 "
        "(docs/reliability.md findings 6 and 7: a start held by a worker cut from PostgreSQL, "
        "41-59 s; a paused worker's matches not restarted, events missing); the run still runs "
        "and prints its verdict, XPASS when it holds"
    ),
)
def test_a_three_minute_seeded_chaos_run_keeps_every_guarantee(repo_root):
    if os.geteuid() != 0:
        pytest.skip("test hosts need root (network namespaces, veth pairs, iptables)")
    done = subprocess.run(
        [
            sys.executable,
            "bench/chaos.py",
            "--minutes",
            str(MINUTES),
            "--seed",
            str(SEED),
            "--bound",
            str(BOUND_SECONDS),
            *(arg for kind in WITHOUT for arg in ("--without", kind)),
            "--json",
        ],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    printed = f"bench/chaos.py printed no JSON (exit {done.returncode}):\n{done.stderr[-4000:]}"
    assert done.stdout.strip(), printed
    result = json.loads(done.stdout)
    shown = json.dumps({k: v for k, v in result.items() if k != "schedule"}, indent=1)
    assert result["ok"] and not result["violations"], f"{shown}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{shown}\n{done.stderr[-3000:]}"
    assert result["seed"] == SEED and result["events_missing"] == 0
    # What was done, not the plan: most planned faults were injected (a few may find their worker
    # being restarted), and each kind the schedule holds at least once.
    injected, planned = result["faults"], result["faults_planned"]
    assert sum(injected.values()) >= 0.8 * sum(planned.values()), (injected, planned)
    assert {k for k, n in injected.items() if n} == {k for k, n in planned.items() if n}, (injected, planned)
