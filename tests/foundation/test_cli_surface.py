"""The CLI's surface without services: every command explains itself, and a call missing a required
argument or option is one ``Error:`` line with exit 2 (click's usage errors), before anything connects.

The commands are walked from the root group, so a new command is covered the day it is added.
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from cli.main import cli


def walk(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command below ``command`` with its path of names (the root's path is empty)."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            found += walk(sub, (*path, name))
    return found


COMMANDS = walk(cli)
IDS = [" ".join(path) or "kickoff" for path, _ in COMMANDS]


#: The default of a parameter given none, whatever click uses for it (None up to click 8.1, a
#: sentinel from 8.2 on): a fresh parameter's own.
NO_DEFAULT = click.Argument(["unset"]).default


def required_parameter(command: click.Command) -> click.Parameter | None:
    """The first parameter a call must give (required, no default, no environment variable)."""
    for param in command.params:
        unset = param.default is None or param.default is NO_DEFAULT
        if param.required and unset and not getattr(param, "envvar", None):
            return param
    return None


#: Commands with a required parameter: called without it they must stop at parsing.
NEEDING = [(path, cmd, p) for path, cmd in COMMANDS if (p := required_parameter(cmd)) is not None]
#: How many there were when this was last raised (30 on click 8.5, issue 36): fewer means the
#: detection above lost some (it found 2 once, click's unset default having changed).
FEWEST_NEEDING = 30


def test_every_command_with_a_required_parameter_is_a_case_of_the_missing_parameter_test() -> None:
    """Counted two ways: a required parameter (with no default nor environment variable today: one
    that gets either becomes an exception to list here) and the cases' own detection."""
    required = {path for path, cmd in COMMANDS if any(p.required for p in cmd.params)}
    assert {path for path, _, _ in NEEDING} == required
    assert len(NEEDING) >= FEWEST_NEEDING, [" ".join(path) for path, _, _ in NEEDING]


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path) -> CliRunner:
    """A CliRunner in an empty directory: no developer .env in reach of the root callback's settings."""
    monkeypatch.chdir(tmp_path)
    return CliRunner()


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_every_command_has_help_naming_it_and_documenting_each_option(path, command) -> None:
    ctx = click.Context(command, info_name=" ".join(("kickoff", *path)))
    text = command.get_help(ctx)
    assert text.startswith(f"Usage: {' '.join(('kickoff', *path))}")
    first_line = (command.help or command.short_help or "").strip().splitlines()[0]
    assert first_line and " ".join(first_line.split()[:4]) in " ".join(text.split())
    undocumented = [
        p.name for p in command.params if isinstance(p, click.Option) and not p.hidden and not p.help
    ]
    assert undocumented == []


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_no_two_options_of_a_command_share_a_flag(path, command) -> None:
    flags = [
        flag for p in command.params if isinstance(p, click.Option) for flag in (*p.opts, *p.secondary_opts)
    ]
    assert len(flags) == len(set(flags))


@pytest.mark.parametrize(
    ("path", "command", "param"), NEEDING, ids=[" ".join(path) for path, _, _ in NEEDING]
)
def test_a_call_without_a_required_parameter_is_one_error_line_and_exit_2(
    runner, path, command, param
) -> None:
    result = runner.invoke(cli, list(path))
    assert result.exit_code == 2, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("Error: Missing"), result.output
    names = [
        name
        for p in command.params
        if p.required
        for name in (p.opts if isinstance(p, click.Option) else [p.human_readable_name])
    ]
    assert any(name in first for name in names), first
    assert "Usage:" not in result.output


def test_an_unknown_command_is_one_error_line_and_exit_2(runner) -> None:
    result = runner.invoke(cli, ["no-such-command"])
    assert result.exit_code == 2
    assert [line for line in result.output.splitlines() if line.strip()] == [
        "Error: No such command 'no-such-command'."
    ]


def test_the_root_help_lists_every_command_group(runner) -> None:
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in cli.commands:
        assert f"  {name} " in result.output or f"  {name}\n" in result.output, name
