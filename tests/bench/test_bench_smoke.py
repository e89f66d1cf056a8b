"""Every benchmark in bench/ runs at a tiny size, prints one JSON object with ``--json``, and exits 1
when a goal is missed: each is given one goal it cannot meet and must name it as missed.

Each bench makes its own throw-away database, RabbitMQ vhost, Redis key prefix and Dramatiq
namespace (a random tag) and picks its ports like the tests (harness/ports.py), so these run beside
any other test. They prove the benches work and can fail; the figures of a tiny run mean nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHES = sorted(
    p.stem for p in (ROOT / "bench").glob("*.py") if not p.stem.startswith("_") and p.stem != "docfigures"
)
#: Benches another helper owns and checks (the chaos suite).
NOT_HERE = {"chaos"}


@dataclass(frozen=True)
class Case:
    """A bench at a tiny size with one impossible goal, and a figure the run must have measured."""

    bench: str
    args: tuple[str, ...]
    impossible: tuple[str, str]  # (goal option, value)
    missed: str  # the goal's name
    measured: str  # a figure (dotted path) that must be a number
    timeout: float = 300


CASES = [
    Case("trigger_latency", ("--requests", "5"), ("--goal-p99-ms", "0"), "p99_ms", "p50_ms"),
    Case(
        "drain_throughput",
        ("--messages", "300", "--rounds", "1", "--baseline-messages", "20", "--legacy-ref", ""),
        ("--goal-ratio-baseline", "1e9"),
        "ratio_baseline",
        "ratio_unconfirmed",
    ),
    Case(
        "launcher",
        ("--runs", "4", "--cap", "2", "--single", "2"),
        ("--goal-ratio-bare-pool", "1e9"),
        "ratio_bare_pool",
        "added_latency_ms",
    ),
    Case(
        "dispatch",
        (
            "--eligible",
            "20",
            "--sizes",
            "40,80",
            "--ticks",
            "1",
            "--stops",
            "2",
            "--listeners",
            "3",
            "--legacy-ref",
            "",
        ),
        ("--goal-tick-ms-per-1000", "0"),
        "tick_ms_per_1000",
        "stop_p95_ms",
    ),
    Case(
        "api_latency",
        ("--requests", "5", "--clients", "2", "--total", "20"),
        ("--goal-triggers-per-s", "1e9"),
        "triggers_per_s",
        "http_overhead_p50_ms",
    ),
    Case(
        "api_latency",
        ("--tracing", "--requests", "5", "--clients", "2", "--total", "8", "--rounds", "2"),
        ("--goal-tracing-p50-ratio", "0"),
        "tracing_p50_ratio",
        # not a CPU ratio: at this size the off server's CPU can be 0 ticks of /proc's 10 ms (not measured)
        "tracing_rate_ratio",
    ),
    Case(
        "dispatch",
        ("--tracing", "--eligible", "20", "--sizes", "40", "--ticks", "1"),
        ("--goal-tracing-tick-ratio", "0"),
        "tracing_tick_ratio",
        "tracing_cpu_ratio",
    ),
    Case(
        "stream_ingest",
        ("--tracing", "--events", "300", "--rounds", "2"),
        ("--goal-tracing-ratio", "1e9"),
        "tracing_ratio",
        "spans_per_run",
    ),
    Case(
        "api_latency",
        ("--viewers", "2", "--board", "20", "--seconds", "2", "--scrapers", "1"),
        ("--goal-tx-ratio", "0"),
        "tx_ratio",
        "p99_ratio",
    ),
    Case(
        "listener_density",
        ("--sizes", "3", "--warmup", "2", "--window", "3"),
        ("--goal-cpu-pct", "-1"),
        "cpu_pct",
        "per_listener_kb",
    ),
    Case(
        "listener_worker_density",
        ("--sizes", "3", "--warmup", "2", "--window", "3"),
        ("--goal-cpu-pct", "-1"),
        "cpu_pct",
        "per_listener_kb",
    ),
    Case(
        "recovery",
        ("--kills", "1", "--handoffs", "1", "--matches", "1"),
        ("--goal-kill-p99-s", "0"),
        "kill_p99_s",
        "handoff_gap_max_s",
        timeout=600,
    ),
    Case(
        "liveness",
        ("--kills", "2", "--leases", "10"),
        ("--goal-redis-death-seen-p99-ms", "0"),
        "redis_death_seen_p99_ms",
        "judge.10.ms_per_call",
    ),
    Case(
        "stream_ingest",
        ("--events", "300", "--leagues", "mlb"),
        ("--goal-record-only-events-per-s", "1e9"),
        "record_only_events_per_s",
        "processing_on.mlb",
    ),
    Case(
        "fleet",
        (
            "--workers",
            "1",
            "--listeners",
            "3",
            "--event-seconds",
            "1",
            "--warmup",
            "2",
            "--window",
            "4",
            "--max-seconds",
            "60",
        ),
        ("--goal-peak-pg-connections", "0"),
        "peak_pg_connections",
        "sent_p99_s",
        timeout=600,
    ),
    Case(
        "matches_board",
        ("--matches", "40", "--requests", "1"),
        ("--goal-slowest-p50-ms", "0"),
        "slowest_p50_ms",
        "pages.default, changed.p50_ms",
    ),
]


def _run(bench: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / f"{bench}.py"), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_bench_but_those_of_other_owners_has_a_case_here() -> None:
    cased = {case.bench for case in CASES} | {"console_screenshots"}
    assert set(BENCHES) - NOT_HERE == cased


@pytest.mark.e2e
def test_every_bench_answers_help_with_its_goals_json_and_exit_status() -> None:
    running = {
        bench: subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / f"{bench}.py"), "--help"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for bench in sorted(set(BENCHES) - NOT_HERE)
    }
    for bench, proc in running.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (bench, err)
        assert "--json" in out and "--save" in out and "--goal-" in out, bench
        assert "Exit status" in out, bench


@pytest.mark.e2e
@pytest.mark.timeout(700)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.bench}-{c.missed}")
def test_a_bench_at_a_tiny_size_exits_1_on_an_impossible_goal_and_names_it(case: Case) -> None:
    done = _run(case.bench, *case.args, *case.impossible, "--json", timeout=case.timeout)
    assert done.returncode == 1, done.stderr[-3000:]
    result = json.loads(done.stdout)  # stdout is the JSON object alone
    assert result["bench"] == case.bench and result["verdict"] == "missed"
    goals = {g["name"]: g for g in result["goals"]}
    assert goals[case.missed]["met"] is False
    assert goals[case.missed]["limit"] == float(case.impossible[1])
    node = result["figures"]
    for part in case.measured.split("."):
        node = node[part]
    assert isinstance(node, int | float), (case.measured, node)
    assert result["machine"]["cores"] >= 1


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_bench_whose_goals_are_met_exits_0() -> None:
    done = _run(
        "trigger_latency", "--requests", "5", "--goal-p50-ms", "1e9", "--goal-p99-ms", "1e9", timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verdict: met" in done.stdout


@pytest.mark.browser
@pytest.mark.timeout(400)
def test_console_screenshots_exits_1_unless_every_screenshot_was_written(tmp_path: Path) -> None:
    done = _run(
        "console_screenshots",
        "--out",
        str(tmp_path),
        "--play",
        "20",
        "--goal-written",
        "5",
        "--json",
        timeout=360,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    result = json.loads(done.stdout)  # one JSON object even when the screenshots failed
    assert result["verdict"] == "missed" and result["goals"][0]["limit"] == 5
    written = {p.name for p in tmp_path.glob("*.png")}
    assert result["figures"]["written"] == len(written)
    assert result["figures"]["error"] is not None or written == {
        "console-board.png",
        "console-matches.png",
        "console-history.png",
        "console-match.png",
    }
