"""The ``kickoff`` entry point: builds the context object and turns KickoffErrors into one line."""

from __future__ import annotations

import logging
import sys

import click
from pydantic import ValidationError

from cli.actions import actions
from cli.amqp import amqp
from cli.apikeys import apikeys
from cli.check import check
from cli.config_cmd import config_group
from cli.context import CliContext
from cli.db import db
from cli.demo import demo
from cli.enqueue import enqueue
from cli.launcher import launcher
from cli.leagues import leagues
from cli.listen import listen_command
from cli.listeners import listeners
from cli.matches import matches
from cli.outbox import outbox
from cli.players import players
from cli.runs import runs
from cli.scheduler import scheduler_command
from cli.serve import serve_command
from cli.sim import sim_group
from cli.trades import trades
from cli.trigger import trigger
from config.errors import KickoffError, NotFound
from config.settings import load_listener_settings


class KickoffGroup(click.Group):
    """A group whose commands report kickoff errors as one line instead of a traceback."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except NotFound as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(2)
        except KickoffError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=KickoffGroup)
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG level.")
@click.version_option(package_name="kickoff")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """kickoff: live match listeners and transactional publishing.

    Settings come from keyword options, then the environment, then .env at the repository
    root, then defaults (see `kickoff config show` and .env.example).
    """
    try:
        settings = load_listener_settings()
    except ValidationError as exc:
        raise click.ClickException(f"invalid settings: {exc}") from exc
    logging.basicConfig(
        level=logging.DEBUG if verbose else getattr(logging, settings.log_level.upper(), 20),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # pika logs every connection step at INFO and a refused connection with a traceback;
    # kickoff reports those failures itself as one line (BrokerUnavailable).
    logging.getLogger("pika").setLevel(logging.DEBUG if verbose else logging.CRITICAL)
    # yoyo logs each migration step; `kickoff db migrate` prints what it applied itself.
    logging.getLogger("yoyo").setLevel(logging.DEBUG if verbose else logging.WARNING)
    ctx.obj = CliContext(settings=settings)


cli.add_command(db)
cli.add_command(config_group)
cli.add_command(listen_command)
cli.add_command(demo)
cli.add_command(sim_group)
cli.add_command(check)
cli.add_command(runs)
cli.add_command(launcher)
cli.add_command(leagues)
cli.add_command(matches)
cli.add_command(listeners)
cli.add_command(enqueue)
cli.add_command(scheduler_command)
cli.add_command(trigger)
cli.add_command(outbox)
cli.add_command(players)
cli.add_command(actions)
cli.add_command(amqp)
cli.add_command(trades)
cli.add_command(serve_command)
cli.add_command(apikeys)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="kickoff")
