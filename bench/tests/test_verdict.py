"""bench/_verdict.py: goals as options, the verdict, the JSON object, the results file, the exit status."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench import _verdict
from bench._verdict import Bench, Goal, figure_at

BENCH = Bench(
    "toy",
    "A toy bench.\n\nMore text.",
    [
        Goal("p99_ms", 10, at_most=True, unit="ms", source="somewhere"),
        Goal("rate", 100, at_most=False, unit="/s"),
        Goal("nested", 1, at_most=True, figure="deep.value"),
    ],
)


REAL_MACHINE = _verdict.machine


@pytest.fixture(autouse=True)
def quick_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine record without its CPU probe (a fraction of a second per call)."""
    monkeypatch.setattr(_verdict, "machine", lambda: {"cores": 2, "probe": {"python_loop_ms": 1.0}})


def test_the_machine_is_recorded_with_its_cores_and_a_cpu_probe() -> None:
    found = REAL_MACHINE()
    assert found["cores"] >= 1 and found["usable_cores"] >= 1
    assert found["probe"]["python_loop_ms"] > 0 and found["probe"]["sha256_mib_per_s"] > 0
    assert len(found["load_before"]) == 3


def _args(*argv: str):
    return BENCH.parser().parse_args(list(argv))


def test_each_goal_is_an_option_whose_default_is_todays_goal() -> None:
    args = _args()
    assert (args.goal_p99_ms, args.goal_rate, args.goal_nested) == (10, 100, 1)
    assert _args("--goal-p99-ms", "2.5").goal_p99_ms == 2.5
    assert "--goal-p99-ms" in BENCH.parser().format_help()


def test_every_goal_met_is_verdict_met_and_exit_0() -> None:
    figures = {"p99_ms": 10.0, "rate": 100, "deep": {"value": 0.5}}
    result = BENCH.result(_args(), figures)
    assert result["verdict"] == "met"
    assert [g["met"] for g in result["goals"]] == [True, True, True]
    assert BENCH.finish(_args(), figures) == 0


@pytest.mark.parametrize(
    ("figures", "missed"),
    [
        ({"p99_ms": 10.01, "rate": 100, "deep": {"value": 0}}, "p99_ms"),
        ({"p99_ms": 1, "rate": 99.9, "deep": {"value": 0}}, "rate"),
        ({"p99_ms": 1, "rate": 100, "deep": {"value": 2}}, "nested"),
        ({"p99_ms": 1, "rate": 100}, "nested"),  # not measured is not met
        ({"p99_ms": None, "rate": 100, "deep": {"value": 0}}, "p99_ms"),
    ],
)
def test_one_goal_missed_or_not_measured_is_verdict_missed_and_exit_1(figures, missed) -> None:
    result = BENCH.result(_args(), figures)
    assert result["verdict"] == "missed"
    assert [g["name"] for g in result["goals"] if not g["met"]] == [missed]
    assert BENCH.finish(_args(), figures) == 1


def test_a_goal_given_on_the_command_line_is_judged_instead_of_the_default() -> None:
    figures = {"p99_ms": 5, "rate": 100, "deep": {"value": 0}}
    assert BENCH.finish(_args("--goal-p99-ms", "4"), figures) == 1
    assert BENCH.finish(_args("--goal-p99-ms", "6"), figures) == 0


def test_a_skipped_goal_is_reported_but_not_judged() -> None:
    result = BENCH.result(_args(), {"p99_ms": 1, "rate": 1000}, skipped=["nested"])
    assert result["verdict"] == "met"
    assert result["goals"][2]["met"] is None


def test_save_writes_the_result_under_the_bench_and_variant_name(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_verdict, "RESULTS", tmp_path)
    figures = {"p99_ms": 1, "rate": 1000, "deep": {"value": 0}}
    assert BENCH.finish(_args("--save"), figures, variant="big") == 0
    saved = json.loads((tmp_path / "toy-big.json").read_text())
    assert saved["figures"] == figures and saved["variant"] == "big" and saved["verdict"] == "met"
    assert saved["machine"]["cores"] == 2 and len(saved["machine"]["load_after"]) == 3
    assert saved["args"]["goal_p99_ms"] == 10


def test_figure_at_follows_a_dotted_path() -> None:
    assert figure_at({"a": {"b": {"c": 3}}}, "a.b.c") == 3
    assert figure_at({"a": {}}, "a.b") is None


def test_with_json_stdout_is_one_json_object_and_everything_else_goes_to_stderr(tmp_path: Path) -> None:
    script = tmp_path / "toy.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys
            sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
            from bench._verdict import Bench, Goal
            BENCH = Bench("toy", "Toy.", [Goal("x", 1, at_most=True)])
            args = BENCH.parser().parse_args()
            with BENCH.output(args):
                print("progress")
                subprocess.run(["echo", "a child's line"])
                sys.exit(BENCH.finish(args, {{"x": 2}}))
            """
        )
    )
    done = subprocess.run([sys.executable, str(script), "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["verdict"] == "missed" and result["figures"] == {"x": 2}
    assert "progress" in done.stderr and "a child's line" in done.stderr
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert (
        plain.returncode == 1
        and "verdict: missed" in plain.stdout
        and "goal x: 2 <= 1: MISSED" in plain.stdout
    )
