"""The ``kickoff`` entry point: builds the context object; the one top-level error handler.

Every error ends as one line on stderr and the exit code of its kind (``cli.answers.EXIT_OF``: 2
not found, 3 invalid, 4 conflict, 5 unavailable, else 1); the traceback is printed only with ``-v``.
"""

from __future__ import annotations

import logging
import sys
import traceback

import click

from cli.actions import actions
from cli.amqp import amqp
from cli.answers import exit_code_of
from cli.apikeys import apikeys
from cli.audit import audit
from cli.check import check
from cli.config_cmd import config_group
from cli.console import console
from cli.context import CliContext
from cli.db import db
from cli.dead_letters import dead_letters
from cli.demo import demo
from cli.enqueue import enqueue
from cli.events import events
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
from cli.up import up
from config.errors import KickoffError
from config.log import configure_logging
from config.settings import load_settings
from config.tracing import configure_tracing

#: The service name (OTEL_SERVICE_NAME unset) of a command's spans; any other command: kickoff-cli.
TRACED_SERVICES = {
    "serve": "kickoff-api",
    "launcher": "kickoff-launcher",
    "scheduler": "kickoff-scheduler",
    "listen": "kickoff-listener",
    "sim": "kickoff-srsim",
}
#: Commands that set no tracing up: ``check`` reports a bad OTEL_* value instead of failing on it;
#: ``up`` and ``demo`` only supervise processes that set theirs up themselves.
UNTRACED_COMMANDS = frozenset({"check", "config", "up", "demo"})


def _fail(ctx: click.Context, line: str, code: int) -> None:
    """Print ``line`` (the traceback first with -v) and exit with ``code``."""
    if ctx.params.get("verbose"):
        traceback.print_exc()
    click.echo(f"Error: {line}", err=True)
    sys.exit(code)


class KickoffGroup(click.Group):
    """The root group: every error below it is one line on stderr, never a traceback (unless -v)."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            exc.ctx = None  # one line ("Error: ..."), not the usage block: `--help` shows that
            raise
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KickoffError as exc:
            _fail(ctx, str(exc), exit_code_of(exc))  # by its kind (cli.answers.EXIT_OF)
        except Exception as exc:  # a bug or an untranslated driver error: still one line
            first = (str(exc).strip().splitlines() or [""])[0]
            _fail(ctx, f"unexpected {type(exc).__name__}: {first} (run kickoff -v ... for the traceback)", 1)
        return None


@click.group(cls=KickoffGroup)
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG level; print the traceback of an error.")
@click.version_option(package_name="kickoff")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """kickoff: live match listeners and transactional publishing.

    Settings come from keyword options, then the environment, then .env at the repository
    root, then defaults (see `kickoff config show` and .env.example).
    """
    settings = load_settings()
    # A one-shot command prints what it did itself: its INFO logs would say it twice, so it logs
    # warnings only; long-running commands call CliContext.log_progress (LOG_LEVEL).
    level = max(getattr(logging, settings.log_level), logging.WARNING)
    configure_logging(level=logging.DEBUG if verbose else level, fmt=str(settings.log_format))
    # pika logs every connection step at INFO and a refused connection with a traceback;
    # kickoff reports those failures itself as one line (BrokerUnavailable).
    logging.getLogger("pika").setLevel(logging.DEBUG if verbose else logging.CRITICAL)
    # yoyo logs each migration step; `kickoff db migrate` prints what it applied itself.
    logging.getLogger("yoyo").setLevel(logging.DEBUG if verbose else logging.WARNING)
    if ctx.invoked_subcommand not in UNTRACED_COMMANDS:
        configure_tracing(service=TRACED_SERVICES.get(ctx.invoked_subcommand or "", "kickoff-cli"))
    ctx.obj = CliContext(settings=settings, verbose=verbose)


cli.add_command(db)
cli.add_command(config_group)
cli.add_command(listen_command)
cli.add_command(demo)
cli.add_command(up)
cli.add_command(sim_group)
cli.add_command(check)
cli.add_command(runs)
cli.add_command(launcher)
cli.add_command(leagues)
cli.add_command(matches)
cli.add_command(events)
cli.add_command(listeners)
cli.add_command(enqueue)
cli.add_command(dead_letters)
cli.add_command(scheduler_command)
cli.add_command(trigger)
cli.add_command(outbox)
cli.add_command(players)
cli.add_command(actions)
cli.add_command(amqp)
cli.add_command(trades)
cli.add_command(serve_command)
cli.add_command(console)
cli.add_command(apikeys)
cli.add_command(audit)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="kickoff")
