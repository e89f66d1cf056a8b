"""deploy/'s Prometheus rules and Grafana dashboard: promtool checks and tests the rules, each alert
names a runbook command that exists, and every metric they name is one `kickoff serve` exports."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from datetime import timedelta
from typing import Any

import click
import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from cli.main import cli
from config.clock import utcnow
from tests.api.conftest import REPO, bearer
from tests.waiting import wait_for

RULES = REPO / "deploy/prometheus/kickoff-rules.yml"
RULE_TESTS = REPO / "deploy/prometheus/kickoff-rules.test.yml"
DASHBOARD = REPO / "deploy/grafana/kickoff.json"
METRIC_NAME = re.compile(r"\bkickoff_[a-zA-Z0-9_]+")
#: The series names prometheus_client writes for each sample of a family, by the family's type.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
}


def _alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _promtool(*args: str) -> None:
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: apt-get install -y prometheus (scripts/test installs it)"
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}{done.stderr}"


@pytest.mark.tools
def test_promtool_accepts_the_rules_and_their_unit_tests_pass():
    _promtool("check", "rules", str(RULES))
    _promtool("test", "rules", str(RULE_TESTS))


@pytest.mark.tools
def test_promtool_parses_every_expression_of_the_dashboard(tmp_path):
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    grafana = {"$__rate_interval": "5m", "$job": ".*"}  # what Grafana puts in before it asks
    rules = [
        {"record": f"dashboard:expr_{i}", "expr": re.sub(r"\$\w+", lambda m: grafana[m[0]], e)}
        for i, e in enumerate(exprs)
    ]
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    _promtool("check", "rules", str(path))


def _missing_command(line: str) -> str | None:
    """The part of ``kickoff LINE`` the CLI does not have (a command or an option), or None."""
    command: click.Command = cli
    path: list[str] = []
    for word in line.split():
        if word.startswith("-"):
            if word not in {opt for param in command.params for opt in param.opts}:
                return f"{' '.join(path)} {word}"
        elif isinstance(command, click.Group) and word.islower():
            sub = command.get_command(click.Context(command), word)  # also commands built when looked up
            if sub is None:
                return " ".join([*path, word])
            command, path = sub, [*path, word]
    return None


def test_each_alert_has_a_severity_a_runbook_command_and_a_firing_and_a_quiet_unit_test():
    fired, quiet = set(), set()
    for group in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in group["alert_rule_test"]:
            (fired if case["exp_alerts"] else quiet).add(case["alertname"])
    alerts = _alert_rules()
    names = {rule["alert"] for rule in alerts}
    assert fired == names and quiet == names
    missing = set()
    for rule in alerts:
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        commands = re.findall(r"`kickoff ([^`]+)`", rule["annotations"]["description"])
        assert commands, f"{rule['alert']} names no `kickoff ...` command"
        missing |= {m for m in map(_missing_command, commands) if m is not None}
    assert not missing, f"not kickoff commands: {sorted(missing)}"


def _dashboard_expressions(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if variable["type"] == "query":
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def test_the_dashboard_is_a_grafana_model_on_a_prometheus_datasource_variable():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36 and dashboard["uid"] and dashboard["title"]
    [datasource] = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert datasource["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == f"${{{datasource['name']}}}", panel["title"]
            assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]


def _named_metrics() -> set[str]:
    """Every kickoff_ series the rules, their unit tests and the dashboard name."""
    texts = [json.dumps(rule) for rule in _alert_rules()]  # expressions and annotation queries
    for group in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        texts += [s["series"].split("{", 1)[0] for s in group["input_series"]]
    texts += _dashboard_expressions(json.loads(DASHBOARD.read_text()))
    return {name for text in texts for name in METRIC_NAME.findall(text)}


def _exported(text: str) -> set[str]:
    """The series names of a /metrics text, with the suffixes of each family's type."""
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in SUFFIXES.get(family.type, ("",))
    }


def _scrape(url: str, **kwargs: Any) -> str:
    response = httpx.get(url + "/metrics", timeout=60, **kwargs)
    assert response.status_code == 200, response.text
    return response.text


def test_every_metric_the_rules_and_the_dashboard_name_is_exported_by_kickoff_serve(api_server):
    exported = _exported(_scrape(api_server.url))
    named = _named_metrics()
    assert {"kickoff_listeners", "kickoff_trigger_request_seconds_bucket"} <= named  # the parse found them
    unknown = named - exported
    assert not unknown, f"named but not exported: {sorted(unknown)}"


def _gauges(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_metrics_report_each_service_of_readyz(api_server, broken_server, keys, fresh_queues):
    services = ("PostgreSQL", "Redis", "Dramatiq broker", "RabbitMQ")
    every_one_ok = {(("service", s),): 1.0 for s in services}
    # An answer is kept 2 s: one read before the queues were declared may still be served.
    wait_for(
        lambda: _gauges(_scrape(api_server.url), "kickoff_readiness_service_ok") == every_one_ok,
        timeout=30,
        what="every service ok in kickoff_readiness_service_ok",
    )
    broken = _gauges(_scrape(broken_server.url, headers=bearer(keys["read"])), "kickoff_readiness_service_ok")
    assert broken == {(("service", s),): (0.0 if s == "RabbitMQ" else 1.0) for s in services}


def test_metrics_report_the_age_of_the_newest_scheduler_tick(api_server, coordination, redis_client):
    def age() -> float:
        [value] = _gauges(_scrape(api_server.url), "kickoff_scheduler_last_tick_age_seconds").values()
        return value

    ticks = list(redis_client.scan_iter(match=coordination.tick_key("*", "*"), count=1000))
    if ticks:
        redis_client.delete(*ticks)
    assert age() == math.inf
    now = utcnow()
    coordination.ticks.claim_tick("tick_job_runs", now - timedelta(minutes=5), owner="test", ttl_seconds=60)
    assert 300 <= age() < 400
    coordination.ticks.claim_tick("drain_outbox", now - timedelta(minutes=2), owner="test", ttl_seconds=60)
    assert 120 <= age() < 220
    assert _gauges(_scrape(api_server.url), "kickoff_metrics_source_up")[(("source", "scheduler"),)] == 1
