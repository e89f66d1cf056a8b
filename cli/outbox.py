"""``kickoff outbox``: drain pending messages, show backlog and dead rows, retry dead rows."""

from __future__ import annotations

import click

from cli.common import echo_json
from cli.context import CliContext
from publisher.drain import drain_outbox_concurrently
from publisher.outbox import outbox_report, retry_dead


@click.group()
def outbox() -> None:
    """The activity outbox (lineup_updates, waiver_actions, draft_targets).

    A message is saved with its action and published at once; when the broker did not confirm
    it, the row stays pending and the drain retries it with exponential backoff until it is
    confirmed or, after OUTBOX_MAX_ATTEMPTS, dead. A missing queue keeps rows pending (run
    `kickoff amqp setup`).
    """


@outbox.command("drain")
@click.option(
    "--max-seconds", type=float, default=None, help="Stop after this long (default OUTBOX_DRAIN_MAX_SECONDS)."
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Drains side by side, each with its own connections (default OUTBOX_DRAIN_WORKERS).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def drain_cmd(obj: CliContext, max_seconds: float | None, workers: int | None, as_json: bool) -> None:
    """Publish every due row now: releases chained claims, expires late draft targets."""
    obj.database()
    report = drain_outbox_concurrently(settings=obj.settings, workers=workers, max_seconds=max_seconds)
    if as_json:
        echo_json(report.as_json())
    else:
        click.echo(
            f"published {report.published}, failed {report.failed}, expired {report.expired}, "
            f"released {report.released}, cancelled {report.cancelled} in {report.batches} batches"
        )


@outbox.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def status_cmd(obj: CliContext, as_json: bool) -> None:
    """Show the backlog (pending rows), held claims, the oldest pending age and dead rows."""
    obj.database()
    report = outbox_report()
    if as_json:
        echo_json(report.as_json())
        return
    age = "-" if report.oldest_pending_age_seconds is None else f"{report.oldest_pending_age_seconds:.0f}s"
    click.echo(f"backlog: {report.backlog}  held: {report.held}  oldest pending: {age}  dead: {report.dead}")
    for queue, n in report.backlog_by_queue.items():
        click.echo(f"  {queue}: {n} pending")
    for d in report.dead_rows:
        click.echo(
            f"  dead #{d.id} {d.queue} tracking_id={d.tracking_id} attempts={d.attempts}: {d.last_error}"
        )


@outbox.command("retry-dead")
@click.pass_obj
def retry_dead_cmd(obj: CliContext) -> None:
    """Make every dead row pending again with a fresh attempt budget (after fixing the cause)."""
    obj.database()
    click.echo(f"{retry_dead()} dead rows pending again")
