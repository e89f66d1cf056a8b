"""The list of audited acts (models.audit_acts) walked against every route, console form and CLI command."""

from __future__ import annotations

import click
import pytest

from api.auth import route_rules
from models.audit_acts import (
    ACTIONS,
    API,
    CLI,
    CLI_NOT_ACTS,
    CONSOLE,
    TRIGGER_ROUTE_ACTION,
    check_action,
)
from publisher.trigger_queues import ROUTE_PREFIX


def _cli_commands() -> list[str]:
    from cli.main import cli

    def walk(cmd: click.Command, prefix: list[str]):
        if isinstance(cmd, click.Group):
            for name, sub in sorted(cmd.commands.items()):
                yield from walk(sub, [*prefix, name])
        else:
            yield " ".join(prefix)

    return list(walk(cli, []))


def _acting_routes() -> set[tuple[str, str]]:
    from api.app import create_app

    return {(m, p) for (m, p) in route_rules(create_app()) if m not in ("GET", "HEAD", "OPTIONS")}


def test_every_state_changing_route_and_console_form_has_its_declared_action():
    routes = _acting_routes()
    declared = set(API) | set(CONSOLE)
    triggers = {r for r in routes if r[1].startswith(ROUTE_PREFIX + "/") and r not in declared}
    assert routes - declared - triggers == set(), "a state-changing route without its audited action"
    assert declared - routes == set(), "models.audit_acts names a route the application does not serve"
    assert triggers and TRIGGER_ROUTE_ACTION in ACTIONS


def test_every_cli_command_is_an_audited_act_or_says_why_not():
    commands = set(_cli_commands())
    assert commands - set(CLI) - set(CLI_NOT_ACTS) == set(), "a CLI command missing from models.audit_acts"
    assert (set(CLI) | set(CLI_NOT_ACTS)) - commands == set(), "models.audit_acts names no such command"
    assert set(CLI) & set(CLI_NOT_ACTS) == set()


@pytest.mark.parametrize("action", sorted({*API.values(), *CONSOLE.values(), *CLI.values()} - {""}))
def test_each_surface_names_a_declared_action(action):
    assert check_action(action) == action


def test_an_undeclared_action_is_refused_before_anything_is_written():
    from models.audit import Actor, record_audit

    with pytest.raises(ValueError, match="not declared"):
        record_audit(actor=Actor.cli(), action="listener.nuke", target_kind="match", target_id=None)


def test_the_docs_table_is_the_one_generated_from_the_declarations():
    from pathlib import Path

    from models.audit_acts import acts_table

    text = (Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md").read_text()
    assert acts_table() in text, "docs/lifecycle.md: paste models.audit_acts.acts_table() over its table"
