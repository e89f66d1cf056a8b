"""The README's test command, ``scripts/test``: it installs what the suite needs, then runs pytest.

Missing tools are made missing for real: in a private mount namespace (``unshare -m``) a plain
file is bound over each binary, and ``apt-get`` is a stand-in on PATH that records its calls
(its first install fails until an ``update``, as with stale package lists).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "test"

FAKE_APT_GET = """#!/bin/sh
echo "$*" >> "{log}"
case "$1" in
  update) touch "{updated}" ;;
  install) [ -e "{updated}" ] || exit 100 ;;
esac
"""


def _fake_apt_get(tmp_path: Path) -> tuple[Path, Path]:
    """A directory holding the stand-in ``apt-get``, and the file it logs its calls to."""
    bin_dir, log = tmp_path / "bin", tmp_path / "apt-get.log"
    bin_dir.mkdir()
    fake = bin_dir / "apt-get"
    fake.write_text(FAKE_APT_GET.format(log=log, updated=tmp_path / "updated"))
    fake.chmod(0o755)
    log.touch()
    return bin_dir, log


def _run_hiding(
    tmp_path: Path, hidden: list[str], *args: str, as_user: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``scripts/test ARGS`` in a mount namespace where each of ``hidden`` is not executable
    (as the user id ``as_user``, when given, instead of root)."""
    bin_dir, _ = _fake_apt_get(tmp_path)
    blank = tmp_path / "not-a-binary"
    blank.write_text("")
    blank.chmod(0o644)
    binds = "".join(f"mount --bind {shlex.quote(str(blank))} {shlex.quote(p)} && " for p in hidden)
    user = f"setpriv --reuid={as_user} --regid={as_user} --clear-groups " if as_user is not None else ""
    command = f"{binds}exec {user}{shlex.quote(str(SCRIPT))} {shlex.join(args)}"
    # One worker: these runs test the installs, not the parallel run (tests/test_test_command.py).
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", KICKOFF_TEST_WORKERS="0")
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _installed_binary(name: str) -> str:
    found = subprocess.run(["sh", "-c", f"command -v {name} || echo /usr/sbin/{name}"], capture_output=True)
    return os.path.realpath(found.stdout.decode().strip())


@pytest.mark.e2e
def test_missing_chromium_pgbouncer_and_promtool_are_installed_then_pytest_runs_with_the_arguments(tmp_path):
    hidden = ["/usr/bin/chromium", _installed_binary("pgbouncer"), _installed_binary("promtool")]
    done = _run_hiding(tmp_path, hidden, "tests/test_import_graph.py", "-q", "-k", "layers_below")
    assert done.returncode == 0, done.stdout + done.stderr
    calls = (tmp_path / "apt-get.log").read_text().splitlines()
    assert calls == [
        "install -y chromium",
        "update",
        "install -y chromium",
        "install -y pgbouncer",
        "install -y prometheus",
    ]
    assert re.search(r"\b1 passed", done.stdout), done.stdout


@pytest.mark.e2e
def test_nothing_is_installed_when_the_tools_are_there_and_pytests_exit_code_is_passed_through(tmp_path):
    done = _run_hiding(tmp_path, [], "tests/test_import_graph.py", "-q", "-k", "no_test_has_this_name")
    assert done.returncode == 5, done.stdout + done.stderr  # pytest: no tests collected
    assert (tmp_path / "apt-get.log").read_text() == ""


def test_ci_runs_exactly_the_readmes_test_command():
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = quick_start.splitlines()
    [test_command] = [line.split("#")[0].strip() for line in lines if "run the tests" in line]
    assert test_command == "scripts/test"
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert ci_lines[-1] == test_command


@pytest.mark.e2e
def test_the_unit_tier_installs_nothing_even_with_the_tools_missing(tmp_path):
    hidden = ["/usr/bin/chromium", _installed_binary("pgbouncer")]
    done = _run_hiding(
        tmp_path, hidden, "-m", "unit", "tests/test_import_graph.py", "-q", "-k", "layers_below"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "apt-get.log").read_text() == ""
    assert "installing" not in done.stderr and re.search(r"\b1 passed", done.stdout), done.stdout


@pytest.mark.e2e
def test_a_developer_who_is_not_root_is_told_what_is_missing_and_no_install_is_tried(tmp_path):
    """As nobody (65534). This machine's .venv is root's, so nobody's pytest may not start: only the
    script's own answer is asserted."""
    tmp_path.chmod(0o755)
    done = _run_hiding(tmp_path, ["/usr/bin/chromium"], "tests/test_import_graph.py", as_user=65534)
    assert (tmp_path / "apt-get.log").read_text() == ""
    [line] = [x for x in done.stderr.splitlines() if x.startswith("scripts/test:")]
    assert line == "scripts/test: chromium is missing; install it with: sudo apt-get install -y chromium"


@pytest.mark.e2e
def test_quick_leaves_the_long_tests_out_and_keeps_the_rest(tmp_path):
    done = _run_hiding(
        tmp_path, [], "--quick", "--collect-only", "-q", "tests/chaos", "tests/test_import_graph.py"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert not [t for t in collected if "test_chaos_run.py" in t], collected
    assert [t for t in collected if "test_chaos_checker.py" in t] and [
        t for t in collected if "import_graph" in t
    ]
