"""``kickoff outbox``: drain pending messages, show backlog and dead rows, retry dead rows."""

from __future__ import annotations

import click

from cli.common import count_option, echo_json, json_option, reason_option
from cli.context import CliContext
from config.clock import utcnow
from models.audit import AuditContext
from publisher.amqp import publisher_from_settings
from publisher.drain import REPORT_FIELDS, drain_outbox_concurrently
from publisher.outbox import outbox_report, retry_dead
from publisher.queues import TRIGGER_QUEUES


@click.group(
    help=f"The activity outbox ({', '.join(TRIGGER_QUEUES)}).\n\n"
    "A message is saved with its action and published at once; when the broker did not confirm "
    "it, the row stays pending and the drain retries it with capped exponential backoff until it "
    "is confirmed. An unreachable broker or a lost confirm never gives up on a row, however long "
    "the outage; only the broker refusing the message (nack, unroutable) OUTBOX_MAX_ATTEMPTS times "
    "makes it dead. A missing queue keeps rows pending (run `kickoff amqp setup`)."
)
def outbox() -> None:
    """The ``kickoff outbox`` group (its help names the trigger queues)."""


@outbox.command("drain")
@click.option(
    "--max-seconds", type=float, default=None, help="Stop after this long (default OUTBOX_DRAIN_MAX_SECONDS)."
)
@count_option(
    "--workers",
    default=None,
    help="Drains side by side, each with its own connections (default OUTBOX_DRAIN_WORKERS).",
)
@click.option("--now", "now", is_flag=True, help="Ignore backoff: try every pending row now.")
@json_option('Print {"batches", "published", "failed", "expired", "released", "cancelled", "trades", ...}.')
@click.pass_obj
def drain_cmd(
    obj: CliContext, max_seconds: float | None, workers: int | None, now: bool, as_json: bool
) -> None:
    """Publish every due row now: releases chained claims, expires late draft targets, and
    republishes pending trade claims (same message id; uncertain ones wait for
    `kickoff trades reconcile`).

    Rows waiting for their backoff are left alone unless --now is given; the output says how
    many wait and when the first is due. Exit code 1 with one line naming AMQP_URL when RabbitMQ
    cannot be reached (nothing is lost: the rows stay pending).
    """
    obj.database()
    with publisher_from_settings(obj.settings) as probe:
        probe.declare_durable([])  # BrokerConnectionError: one line naming AMQP_URL, exit 1
    report = drain_outbox_concurrently(
        settings=obj.settings, workers=workers, max_seconds=max_seconds, all_due=now, audit=obj.audit()
    )
    if report.broker_error is not None:
        raise click.ClickException(report.broker_error)
    state = outbox_report(pending_limit=1)
    waiting = state.oldest_pending[0] if state.oldest_pending else None
    next_due = min((p.next_attempt_at for p in state.oldest_pending), default=None)
    if as_json:
        echo_json({**report.as_json(REPORT_FIELDS), "backlog": state.backlog, "next_attempt_at": next_due})
        return
    click.echo(
        f"published {report.published}, failed {report.failed}, expired {report.expired}, "
        f"released {report.released}, cancelled {report.cancelled}, trades {report.trades} "
        f"in {report.batches} batches"
    )
    if waiting is not None and waiting.next_attempt_at > utcnow():
        click.echo(
            f"backlog {state.backlog}: the oldest row waits for its backoff until "
            f"{waiting.next_attempt_at.isoformat()} (try {waiting.tries}, last error: {waiting.last_error}); "
            "--now tries it now"
        )
    elif state.backlog:
        click.echo(f"backlog {state.backlog}: rows due now remain (the drain ran out of time); run it again")


@outbox.command("status")
@json_option(
    'Print {"backlog", "held", "dead", "backlog_by_queue", "oldest_pending": [...], "dead_rows": [...]}.'
)
@count_option(
    "--pending", "pending_limit", default=10, minimum=0, help="How many of the oldest pending rows to list."
)
@click.pass_obj
def status_cmd(obj: CliContext, as_json: bool, pending_limit: int) -> None:
    """Show the backlog (pending rows), held claims, the oldest pending rows and dead rows.

    Each listed pending row shows its attempts (the broker's refusals), tries (every publish
    try, outages included), next attempt time and last error.
    """
    obj.database()
    report = outbox_report(pending_limit=pending_limit)
    if as_json:
        echo_json(report.as_json())
        return
    age = "-" if report.oldest_pending_age_seconds is None else f"{report.oldest_pending_age_seconds:.0f}s"
    click.echo(f"backlog: {report.backlog}  held: {report.held}  oldest pending: {age}  dead: {report.dead}")
    for queue, n in report.backlog_by_queue.items():
        click.echo(f"  {queue}: {n} pending")
    for p in report.oldest_pending:
        click.echo(
            f"  pending #{p.id} {p.queue} tracking_id={p.tracking_id} attempts={p.attempts} tries={p.tries} "
            f"next={p.next_attempt_at.isoformat()}: {p.last_error or '-'}"
        )
    for d in report.dead_rows:
        click.echo(
            f"  dead #{d.id} {d.queue} tracking_id={d.tracking_id} attempts={d.attempts}: {d.last_error}"
        )


@outbox.command("retry-dead")
@click.argument("row_ids", nargs=-1, type=click.IntRange(min=1), metavar="[ROW_ID]...")
@reason_option(required=False)
@json_option('Print {"rows": .., "actions": .., "superseded": ..}.')
@click.pass_obj
def retry_dead_cmd(obj: CliContext, row_ids: tuple[int, ...], reason: str | None, as_json: bool) -> None:
    """Make every dead row (or only ROW_IDs, as `status` lists them) pending again with a fresh
    attempt budget (after fixing the cause).

    Its action goes back from failed to queued and holds its key again, so delivery marks it
    delivered. A row whose key a newer action holds meanwhile stays dead (superseded).
    """
    obj.database()
    report = retry_dead(ids=row_ids or None, audit=AuditContext(obj.actor, reason))
    if as_json:
        echo_json(report.as_json())
        return
    click.echo(
        f"{report.rows} dead rows pending again ({report.actions} actions queued again, "
        f"{report.superseded} superseded left dead)"
    )
