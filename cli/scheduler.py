"""``kickoff scheduler``: run the periodic scheduler, or print its table for this app_env."""

from __future__ import annotations

import click

from cli.common import echo_json, json_option
from cli.context import CliContext
from cli.table import echo_table


@click.command("scheduler")
@click.option("--print", "print_only", is_flag=True, help="Print the entries for APP_ENV and exit.")
@json_option("With --print: one JSON object.")
@click.pass_obj
def scheduler_command(obj: CliContext, print_only: bool, as_json: bool) -> None:
    """Send the periodic actors of APP_ENV on their cron slots (runs until killed).

    develop sends dispatch_upcoming_test_match_listeners every minute; staging and production
    send dispatch_upcoming_match_listeners and sweep_stale_match_listeners every minute (plus
    whatever else scheduler/table.py lists). Each slot is sent once cluster-wide: a restarted or
    second scheduler finds the slot's Redis key taken and sends nothing. Run exactly one per
    deployment anyway.
    """
    from scheduler.table import entries_for

    entries = entries_for(obj.settings.app_env)
    if print_only:
        rows = [{"name": e.name, "actor": e.actor, "cron": e.cron, "kwargs": e.kwargs} for e in entries]
        if as_json:
            echo_json({"app_env": str(obj.settings.app_env), "entries": rows})
        else:
            echo_table(
                ("cron", "name", "actor", "kwargs"),
                [(r["cron"], r["name"], r["actor"], r["kwargs"] or "") for r in rows],
                empty=f"no periodic entries in {obj.settings.app_env}",
            )
        return
    from scheduler.runner import run_scheduler

    obj.log_progress()
    run_scheduler()
