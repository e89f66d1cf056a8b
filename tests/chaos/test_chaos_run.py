"""The seeded nemesis in the suite: one 2-minute run of bench/chaos.py over real workers on test hosts.

30 matches on srsim, 3 test hosts (network namespaces, harness/hosts.py) with 2 listener workers
each, the scheduler and a default worker on the host side; kills, pauses, partitions, a Redis
restart, clock skews and deploys from seed ``SEED`` (harness/chaos/schedule.py), then the history
checked (harness/chaos/checker.py): never two streams of one match, no row seen open beside or
written after its successor, every archive equal to srsim's game, every match streaming again
within the bound from the moment it lost its stream. The games outlast the schedule by twice
the bound. About four minutes (a 3-minute schedule until round 5: its first two minutes
hold every kind of fault and both partition modes already, finding 5's overlap included).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.chaos

#: The run's seed: its schedule holds every kind of fault, partitions both black holes and refusals
#: (feed cuts too: a feed cut overlapping its host's PostgreSQL cut and a Redis restart, which
#: left 7 matches 40.6-40.9 s without a stream until a healthy reaper closed the given-back rows:
#: 20.8 s since, docs/reliability.md finding 5).
SEED = 62
MINUTES = 2
#: The recovery bound asserted here: the takeover bound (30 s, the bench's default: a lease, its
#: reaper poll, the longest reconnect backoff step a 30 s cut reaches, and a start) plus 10 s for
#: the suite's loaded machine (one lease plus its renewal slack: the bench measured up to 20.3 s
#: on the development machine, docs/reliability.md). The matches the reapers used to leave for
#: the next dispatch tick (findings 2-4) are restarted at once now, and a takeover's start no
#: longer goes to a worker cut from PostgreSQL or Redis (findings 6, 7); one that still waits for
#: a tick (a run younger than a minute that ran out of reconnects) breaks this bound.
BOUND_SECONDS = 40
#: The bound from a kill to each of its worker's matches streaming again: issue 37's 3 s (the
#: bench's default) plus 3 s for the loaded machine (a run at load average 15 measured 1.16 s).
KILL_BOUND_SECONDS = 6


@pytest.mark.timeout(660)
def test_a_two_minute_seeded_chaos_run_keeps_every_guarantee(repo_root):
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
            "--kill-bound",
            str(KILL_BOUND_SECONDS),
            "--json",
        ],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    printed = f"bench/chaos.py printed no JSON:\n{done.stderr[-4000:]}\n(exit {done.returncode})"
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
