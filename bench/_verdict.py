"""Goals and verdicts of a benchmark: options, one JSON object, a results file and the exit status.

A bench declares its goals once, as a ``Bench`` with ``Goal`` rows, and gets from it:

* an ``argparse`` parser with ``--goal-<name>`` options (today's goal as the default), ``--json``
  (stdout is then one JSON object and nothing else: what the bench prints as it goes, and what its
  subprocesses write to stdout, goes to stderr) and ``--save`` (the object is also written to
  ``bench/results/<name>.json``, where the docs' figures come from: ``bench/docfigures.py``);
* ``finish(args, figures)``: judges each goal against its figure, prints the verdict (or the JSON
  object), saves it, and returns the exit status: 0 when every goal is met, 1 when one is missed
  or its figure was not measured; a goal of a part the options turned off is passed in
  ``skipped`` (reported with ``"met": null``, not judged).

Use::

    BENCH = Bench("trigger_latency", __doc__, [Goal("p99_ms", 25, at_most=True, unit="ms", source="...")])

    def main() -> int:
        parser = BENCH.parser()
        parser.add_argument("--requests", type=int, default=1000)
        args = parser.parse_args()
        with BENCH.output(args):
            figures = measure(args)  # {"p99_ms": 12.3, ...}; nested dicts allowed
            return BENCH.finish(args, figures)

    if __name__ == "__main__":
        sys.exit(main())

A goal's figure is found by its dotted path in ``figures`` (``Goal.figure``, the name by default).
The object: ``{"bench", "variant", "verdict" ("met"|"missed"), "goals": [{"name", "figure",
"limit", "op" ("<="|">="), "value", "unit", "met" (null: skipped), "source"}], "figures", "args", "machine",
"measured_at"}``; ``machine`` says where it ran (cores, CPU model, a CPU speed probe, load average
before and after), so figures from different boxes are not compared blind.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
#: The CPU probe's work: SHA-256 rounds over 64 KiB, in pure Python calls (one core).
_PROBE_ROUNDS = 500
_PROBE_BLOCK = b"kickoff" * 9363


@dataclass(frozen=True)
class Goal:
    """One goal: the figure at ``figure`` (dotted path; ``name`` by default) must be at most
    (``at_most``) or at least ``limit``; ``source`` says where the goal is stated."""

    name: str
    limit: float
    at_most: bool
    unit: str = ""
    source: str = ""
    figure: str = ""
    help: str = ""

    @property
    def option(self) -> str:
        return "--goal-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "goal_" + self.name

    @property
    def op(self) -> str:
        return "<=" if self.at_most else ">="

    def judge(self, value: float | None, limit: float) -> bool:
        if value is None:
            return False
        return value <= limit if self.at_most else value >= limit


def figure_at(figures: Mapping[str, Any], path: str) -> Any:
    """The value at the dotted ``path`` of ``figures`` (None when absent)."""
    node: Any = figures
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def cpu_probe() -> dict[str, float]:
    """A fixed amount of single-core work, timed: a machine's speed beside its figures."""
    began = time.perf_counter()
    digest = b""
    for _ in range(_PROBE_ROUNDS):
        digest = hashlib.sha256(_PROBE_BLOCK + digest).digest()
    hashed = time.perf_counter() - began
    began = time.perf_counter()
    total = 0
    for i in range(500_000):
        total += i & 7
    looped = time.perf_counter() - began
    return {
        "sha256_mib_per_s": _PROBE_ROUNDS * len(_PROBE_BLOCK) / hashed / 2**20,
        "python_loop_ms": looped * 1000,
    }


def machine() -> dict[str, Any]:
    """Where the bench ran: cores, CPU model, the probe, load average (before the run)."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu_model": model,
        "python": platform.python_version(),
        "probe": cpu_probe(),
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }


@dataclass
class Bench:
    """A benchmark's name, description and goals (see the module's docstring)."""

    name: str
    doc: str
    goals: Sequence[Goal]
    _machine: dict[str, Any] = field(default_factory=dict, repr=False)
    _stdout: Any = field(default=None, repr=False)

    def parser(self) -> argparse.ArgumentParser:
        """The bench's parser: its goal options, ``--json`` and ``--save``; add its own options."""
        parser = argparse.ArgumentParser(
            description=self.doc.strip().splitlines()[0],
            epilog=(
                "Exit status: 0 when every goal is met, 1 when one is missed (or its figure could not "
                "be measured), 2 for a bad option."
            ),
        )
        parser.add_argument(
            "--json", action="store_true", help="print one JSON object (figures, goals, verdict) on stdout"
        )
        parser.add_argument(
            "--save",
            action="store_true",
            help=f"also write the JSON object to bench/results/{self.name}[-VARIANT].json (docs' figures)",
        )
        group = parser.add_argument_group("goals (today's goals by default)")
        for goal in self.goals:
            text = goal.help or f"{goal.figure or goal.name} {goal.op} this"
            source = f"; {goal.source}" if goal.source else ""
            unit = f" {goal.unit}" if goal.unit else ""
            escaped = f"{text} (default DEFAULT{unit}{source})".replace("%", "%%")  # argparse formats help
            group.add_argument(
                goal.option,
                dest=goal.dest,
                type=float,
                default=goal.limit,
                metavar="N",
                help=escaped.replace("DEFAULT", "%(default)s"),
            )
        return parser

    @contextlib.contextmanager
    def output(self, args: argparse.Namespace) -> Iterator[None]:
        """The bench's run: the machine is recorded first; with ``--json`` everything written to
        stdout (by this process or a child) goes to stderr, so ``finish`` alone writes stdout."""
        self._machine = machine()
        if not getattr(args, "json", False):
            yield
            return
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
        self._stdout = os.fdopen(saved, "w")
        try:
            with contextlib.redirect_stdout(sys.stderr):
                yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            self._stdout.close()
            self._stdout = None

    def result(
        self,
        args: argparse.Namespace,
        figures: Mapping[str, Any],
        *,
        variant: str = "",
        skipped: Iterable[str] = (),
    ) -> dict[str, Any]:
        """The JSON object of a run: figures, each goal judged, the verdict, the options, the machine.

        ``skipped``: goals whose part of the bench the options turned off (``--stops 0``): listed
        with ``"met": null``, not judged."""
        goals = []
        off = set(skipped)
        for goal in self.goals:
            limit = float(getattr(args, goal.dest, goal.limit))
            value = figure_at(figures, goal.figure or goal.name)
            value = None if value is None else float(value)
            goals.append(
                {
                    "name": goal.name,
                    "figure": goal.figure or goal.name,
                    "op": goal.op,
                    "limit": limit,
                    "value": value,
                    "unit": goal.unit,
                    "met": None if goal.name in off else goal.judge(value, limit),
                    "source": goal.source,
                }
            )
        options = {k: v for k, v in vars(args).items() if k not in {"json", "save"} and _plain(v)}
        return {
            "bench": self.name,
            "variant": variant,
            "verdict": "met" if all(g["met"] is not False for g in goals) else "missed",
            "goals": goals,
            "figures": dict(figures),
            "args": options,
            "machine": {**(self._machine or machine()), "load_after": [round(x, 2) for x in os.getloadavg()]},
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    def finish(
        self,
        args: argparse.Namespace,
        figures: Mapping[str, Any],
        *,
        variant: str = "",
        skipped: Iterable[str] = (),
    ) -> int:
        """Judge, print (a verdict block, or the JSON object with ``--json``), save with ``--save``;
        the exit status (0: every goal met or skipped, 1: one missed)."""
        result = self.result(args, figures, variant=variant, skipped=skipped)
        text = json.dumps(result, indent=None, separators=(", ", ": "), default=str)
        if getattr(args, "save", False):
            path = results_path(self.name, variant)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(result, indent=2, default=str) + "\n")
            print(f"saved {path}", file=sys.stderr)
        if self._stdout is not None:
            self._stdout.write(text + "\n")
            self._stdout.flush()
        else:
            print(verdict_lines(result), flush=True)
        return 0 if result["verdict"] == "met" else 1


def results_path(name: str, variant: str = "") -> Path:
    """``bench/results/<name>[-<variant>].json``."""
    return RESULTS / f"{name}{'-' + variant if variant else ''}.json"


def verdict_lines(result: Mapping[str, Any]) -> str:
    """The goals of a result as lines a person reads, the verdict last."""
    lines = []
    for g in result["goals"]:
        value = "not measured" if g["value"] is None else f"{g['value']:,.4g}"
        unit = f" {g['unit']}" if g["unit"] else ""
        mark = "skipped (not run)" if g["met"] is None else "met" if g["met"] else "MISSED"
        lines.append(f"goal {g['name']}: {value}{unit} {g['op']} {g['limit']:g}{unit}: {mark}")
    lines.append(f"verdict: {result['verdict']}")
    return "\n".join(lines)


def _plain(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool | list)


#: The goals both density benches share (issue 4): a listener's memory and its worker's CPU.
DENSITY_GOALS = (
    Goal("per_listener_kb", 1024, at_most=True, unit="KB", source="issue 4: <= 1 MB each (worst size)"),
    Goal("cpu_pct", 50, at_most=True, unit="%", source="issue 4: <= 50 % of one core (worst size)"),
)
