"""One home per concept (issue 38, structure 3): each of these lives in one module that every user shares.

- The outbox drain: ``publisher.outbox_drain`` holds the drain loop, the batch and the one
  ``DrainReport``; the activity outbox (``publisher.drain.ActivityOutbox``) and the run outbox
  (``runs.publish.RunOutbox``) supply only their rows, messages and marks.
- The service probes: ``api.probes`` holds the probes of PostgreSQL, Redis, the Dramatiq broker
  and RabbitMQ; ``kickoff check``, ``/readyz`` and ``/metrics`` (through ``/readyz``'s round) ask
  through it and ask no service themselves.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path
from types import ModuleType

import pytest

from api.probes import PROBES, Services, ask
from config.errors import RedisUnavailable
from config.settings import KickoffSettings
from publisher import drain as activity_drain
from publisher import outbox_drain
from publisher.outbox_drain import DrainReport, Outbox
from runs import publish as run_publish
from tests.project import ROOT, product_modules

#: The one home of the drain loop and its report.
DRAIN_HOME = Path("publisher/outbox_drain.py")


def _classes_named(name: str) -> list[str]:
    """Where product code defines a class ``name``: module path and line."""
    found = []
    for path in product_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and node.name == name
        ]
    return found


def _drain_functions_returning_a_report() -> dict[str, str]:
    """Each product function whose name says it drains or sends outbox rows and whose return
    annotation names a report: ``module:function`` -> that annotation."""
    found = {}
    for path in product_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or node.returns is None:
                continue
            if "drain" not in node.name and not node.name.startswith("send_"):
                continue
            annotation = ast.unparse(node.returns)
            if annotation.endswith("Report"):
                found[f"{path.relative_to(ROOT)}:{node.name}"] = annotation
    return found


def test_one_module_defines_the_drain_report() -> None:
    assert [where.rsplit(":", 1)[0] for where in _classes_named("DrainReport")] == [str(DRAIN_HOME)]


def test_every_drain_of_either_outbox_reports_through_the_one_report_type() -> None:
    drains = _drain_functions_returning_a_report()
    assert {"publisher/drain.py:drain_outbox", "runs/publish.py:drain_job_runs"} <= set(drains)
    assert {where: kind for where, kind in drains.items() if kind != "DrainReport"} == {}
    for function in (
        activity_drain.drain_outbox,
        activity_drain.drain_outbox_concurrently,
        run_publish.drain_job_runs,
        run_publish.send_outbox_rows,
    ):
        assert typing.get_type_hints(function)["return"] is DrainReport, function.__qualname__


def _parameters(method: object) -> list[tuple[str, str]]:
    """A method's parameters as (name, kind): what an outbox must match of the protocol."""
    return [(p.name, p.kind.name) for p in inspect.signature(method).parameters.values()]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "outbox", [activity_drain.ActivityOutbox, run_publish.RunOutbox], ids=["activity", "run"]
)
def test_each_outbox_supplies_only_its_rows_messages_and_marks(outbox: type) -> None:
    supplied = {name for name in vars(outbox) if not name.startswith("_")}
    assert supplied - {"report_fields"} == {"claim", "sendable", "record"}
    for method in ("claim", "sendable", "record"):
        assert _parameters(getattr(outbox, method)) == _parameters(getattr(Outbox, method)), method
    report_fields = next(f.default for f in dataclasses.fields(outbox) if f.name == "report_fields")
    assert set(report_fields) <= {f.name for f in dataclasses.fields(DrainReport)}


@pytest.mark.parametrize("module", [activity_drain, run_publish], ids=["activity", "run"])
def test_neither_outbox_has_a_drain_loop_of_its_own(module: ModuleType) -> None:
    """Their drain functions hand the batches to publisher.outbox_drain.drain; none loops itself."""
    path = Path(module.__file__ or "")
    tree = ast.parse(path.read_text(), filename=str(path))
    drains = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("drain_")]
    assert drains
    loops = [f"{d.name}:{n.lineno}" for d in drains for n in ast.walk(d) if isinstance(n, ast.While)]
    assert loops == []
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "drain" in calls and module.drain is outbox_drain.drain


#: The surfaces that show the services' state, and what each shows.
PROBE_SURFACES = (Path("cli/check.py"), Path("api/routes/health.py"), Path("api/metrics.py"))
#: What asks a service directly: only the probes' home may call these (besides the stores and the
#: transport that define them).
SERVICE_ASKS = frozenset({"check_connection", "ping_broker", "ping", "check_queue", "queue_depths"})


def _calls(path: Path) -> set[str]:
    """The names of the functions and methods ``path`` calls."""
    tree = ast.parse((ROOT / path).read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


@pytest.mark.parametrize("surface", PROBE_SURFACES, ids=str)
def test_no_surface_asks_a_service_itself(surface: Path) -> None:
    assert _calls(surface) & SERVICE_ASKS == set()


def test_kickoff_check_and_readyz_ask_through_the_one_probe_set() -> None:
    assert "ask_all" in _calls(Path("cli/check.py"))
    assert "ask_all" in _calls(Path("api/routes/health.py"))
    assert "_readiness" in _calls(Path("api/routes/health.py"))  # /metrics records /readyz's round
    assert _calls(Path("api/probes.py")) >= {"check_connection", "ping_broker", "ping", "check_queue"}


def test_each_probe_names_its_service_its_setting_and_its_bound() -> None:
    assert [p.name for p in PROBES] == ["PostgreSQL", "Redis", "Dramatiq broker", "RabbitMQ"]
    for probe in PROBES:
        assert probe.setting.lower() in KickoffSettings.model_fields, probe.name
        assert probe.timeout, probe.name


def test_a_probe_says_the_address_when_up_and_the_error_when_down() -> None:
    settings = KickoffSettings(_env_file=None, redis_url="redis://:secret@cache:6379/0")  # type: ignore[call-arg]
    down = RedisUnavailable(service="Redis", setting="REDIS_URL", address="cache:6379", reason="refused")

    def refuse() -> object:
        raise down

    def unused() -> object:
        raise AssertionError("not asked")

    redis = next(p for p in PROBES if p.name == "Redis")
    failing = ask(redis, Services(settings=settings, bind_database=unused, coordination=refuse, amqp=unused))
    assert (failing.ok, failing.error, failing.detail) == (False, down, str(down))
    answering = ask(
        redis,
        Services(settings=settings, bind_database=unused, coordination=lambda: _Pong(), amqp=unused),  # type: ignore[arg-type,return-value]
    )
    assert (answering.ok, answering.detail) == (True, "at REDIS_URL=redis://:***@cache:6379/0")


class _Pong:
    def ping(self) -> None:
        return None
