"""``kickoff config``: show the settings a process would read (secrets masked), a listener's included."""

from __future__ import annotations

import click

from cli.common import echo_json, json_option
from cli.table import echo_table
from config.settings import env_example, load_listener_settings


@click.group("config")
def config_group() -> None:
    """Inspect kickoff's settings (keyword > environment > .env > defaults)."""


@config_group.command("show")
@json_option("Print one object: setting name -> effective value.")
def show(as_json: bool) -> None:
    """Print every setting with its effective value, a listener's too; the API key shows as ***."""
    values = load_listener_settings().describe()
    if as_json:
        echo_json(values)
        return
    echo_table(("setting", "value"), [(k.upper(), v) for k, v in values.items()], empty="no settings")


@config_group.command("example")
def example() -> None:
    """Print .env.example: every setting with its default and meaning."""
    click.echo(env_example(), nl=False)
