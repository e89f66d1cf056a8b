"""The fast tier (``pytest -m unit``) passes with no service to reach.

It runs in a subprocess with every service URL pointed at a closed port and a PATH without the
binaries fault tests start services with, so a test that needs PostgreSQL, Redis or RabbitMQ but
was left in the unit tier (no service fixture, no service mark) fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
#: Binaries that start or administer a service: the unit tier must not need them.
SERVICE_BINARIES = frozenset({"rabbitmqctl", "redis-server", "pg_ctl"})
#: The unit tier held 863 tests when this was raised (333 before the fakes); far fewer means it
#: stopped being collected.
FEWEST_UNIT_TESTS = 650
#: The share of the whole suite the unit tier holds at least (issue 23: a core that tests without
#: services); its summary line's ``deselected`` are the other tests.
SMALLEST_UNIT_SHARE = 0.40
#: Set in the tier's subprocess: this test found there means the tier took an ``e2e`` test.
INSIDE_THE_TIER = "KICKOFF_TEST_INSIDE_UNIT_TIER"


def closed_service_urls(port: int) -> dict[str, str]:
    """Every service URL of kickoff and of tests/conftest.py's overrides, at 127.0.0.1:``port``."""
    return {
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{port}/kickoff",
        "REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "BROKER_URL": f"redis://127.0.0.1:{port}/2",
        "AMQP_URL": f"amqp://guest:guest@127.0.0.1:{port}/%2F",
        "KICKOFF_TEST_ADMIN_URL": f"postgresql://postgres@127.0.0.1:{port}",
        "KICKOFF_TEST_REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "KICKOFF_TEST_BROKER_URL": f"redis://127.0.0.1:{port}/2",
        "KICKOFF_TEST_AMQP_URL": f"amqp://guest:guest@127.0.0.1:{port}",
    }


def path_without_service_binaries(bin_dir: Path) -> str:
    """A PATH of one directory linking every executable on PATH except ``SERVICE_BINARIES``."""
    bin_dir.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = bin_dir / entry.name
            if entry.name in SERVICE_BINARIES or link.exists() or not os.access(entry.path, os.X_OK):
                continue
            link.symlink_to(entry.path)
    return str(bin_dir)


def test_every_service_url_override_of_the_test_conftest_is_pointed_away() -> None:
    used = set(re.findall(r"KICKOFF_TEST_[A-Z_]+_URL", (ROOT / "tests" / "conftest.py").read_text()))
    assert used <= closed_service_urls(1).keys()


@pytest.mark.e2e  # runs pytest itself; never part of the tier it runs
@pytest.mark.timeout(420)
def test_the_unit_tier_passes_with_every_service_away(tmp_path: Path) -> None:
    assert INSIDE_THE_TIER not in os.environ, "the unit tier took an e2e test (tests/conftest.py)"
    env = dict(os.environ, **closed_service_urls(free_port()), **{INSIDE_THE_TIER: "1"})
    env["PATH"] = path_without_service_binaries(tmp_path / "bin")
    for name in SERVICE_BINARIES:
        assert subprocess.run(["sh", "-c", f"command -v {name}"], env=env).returncode != 0, name

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "unit", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    summary = done.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= FEWEST_UNIT_TESTS, tail
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|skipped|xfailed|deselected)", summary)}
    unit = sum(n for word, n in counts.items() if word != "deselected")
    assert unit / (unit + counts.get("deselected", 0)) >= SMALLEST_UNIT_SHARE, summary
