"""``kickoff runs``: publish a catalog job, list and show runs, drain the run outbox, show the catalog."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from cli.answers import EXIT_CODES_HELP, publisher_answers
from cli.common import (
    LIMIT_OPTION,
    count_option,
    echo_answer,
    echo_json,
    json_option,
    parse_assignments,
    reason_option,
)
from cli.context import CliContext
from cli.table import echo_listing
from models.run_log import RunStatus, Trigger

if TYPE_CHECKING:
    from runs.catalog import Catalog


def _catalog(obj: CliContext) -> Catalog:
    from runs.catalog import load_catalog

    return load_catalog(obj.settings.job_catalog_path)


@click.group()
def runs() -> None:
    """Job runs: publish catalog jobs to the launcher (job_runs) and read run_log.

    A run is written to run_log and the run outbox in one transaction, then its RunCommand is
    published to job_runs; `kickoff launcher` starts it. The catalog is JOB_CATALOG_PATH.
    """


@runs.command(epilog=EXIT_CODES_HELP)
@click.argument("job")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="A run param (repeatable).")
@click.option(
    "--trigger",
    type=click.Choice([Trigger.CLI.value, Trigger.MANUAL.value, Trigger.MCP.value]),
    default=None,
    help="Who asks (default cli); each run gets a fresh dedupe key (its run id). Not with --event.",
)
@click.option(
    "--event",
    "event_key",
    metavar="KEY",
    default=None,
    help="Publish an event run (trigger event) for KEY: one run per job, KEY and debounce window.",
)
@click.option(
    "--debounce-seconds",
    type=click.FloatRange(0, min_open=True),
    default=None,
    help="With --event: the window's length, at most 31 days (default: the job's debounce_seconds, else 60).",
)
@reason_option(required=False)
@json_option('Print {"status": ..., "run_id": ..., "published": ..., ...}.')
@click.pass_obj
@publisher_answers
def publish(
    obj: CliContext,
    job: str,
    params: tuple[str, ...],
    trigger: str | None,
    event_key: str | None,
    debounce_seconds: float | None,
    reason: str | None,
    as_json: bool,
) -> None:
    """Publish a run of catalog job JOB (params are checked against its schema).

    Values of --param are JSON when they parse as JSON (--param seconds=2 is a number), else
    strings. Prints `queued` (RabbitMQ confirmed the command) or `pending` (saved; RabbitMQ did
    not confirm it, the drain publishes it later and a launcher's rescan starts it anyway) with
    the run id. With --event KEY a second event of KEY inside the same window (windows of
    --debounce-seconds, aligned to the epoch) prints `duplicate` and the first run's id; the
    next window is a new run. Params that do not match the job's schema are invalid (exit 3).
    """
    from models.audit import AuditContext
    from publisher.amqp import publisher_from_settings
    from runs.publish import publish_run

    if event_key is not None and trigger is not None:
        raise click.UsageError("--event publishes an event run: drop --trigger")
    if debounce_seconds is not None and event_key is None:
        raise click.UsageError("--debounce-seconds needs --event KEY")
    values = parse_assignments(params, option="--param")
    catalog = _catalog(obj)
    obj.database()
    with publisher_from_settings(obj.settings) as publisher:
        result = publish_run(
            job,
            values,
            trigger=Trigger.EVENT if event_key is not None else (trigger or Trigger.CLI),
            catalog=catalog,
            publisher=publisher,
            event_key=event_key,
            debounce_seconds=debounce_seconds,
            audit=AuditContext(obj.actor, reason),
        )
    if as_json:
        echo_json(result.to_dict())
        return
    note = {
        "pending": " (saved; not yet published, the drain retries)",
        "duplicate": f" (a run of {result.dedupe_key} exists)",
    }.get(result.status, "")
    click.echo(f"{result.status} {result.run_id} {result.job}{note}")


@runs.command(name="list")
@click.option("--job", default=None, help="Only runs of this job.")
@click.option(
    "--status", type=click.Choice([s.value for s in RunStatus]), default=None, help="Only this status."
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Newest N runs.")
@json_option('Print {"count", "runs": [{"run_id", "job", ...}]}.')
@click.pass_obj
def list_runs(obj: CliContext, job: str | None, status: str | None, limit: int, as_json: bool) -> None:
    """List recent runs, newest first: a table of run id, job, trigger, status, attempt, exit code."""
    from runs.publish import recent_runs, run_dict

    obj.database()
    echo_listing(
        as_json,
        "runs",
        list(recent_runs(job=job, status=status, limit=limit)),
        as_dict=run_dict,
        headers=["run_id", "job", "trigger", "status", "attempt", "exit"],
        row=lambda run: [
            run.id,
            run.job,
            run.trigger,
            run.status + (f" ({run.reason})" if run.reason else ""),
            run.attempt,
            run.exit_code,
        ],
        empty="no runs",
        right=["attempt", "exit"],
    )


@runs.command()
@click.argument("run_id")
@json_option('Print the run: {"run_id", "job", "status", ...}.')
@click.pass_obj
def show(obj: CliContext, run_id: str, as_json: bool) -> None:
    """Show one run: trigger, dedupe key, attempts, times, exit code, log file. Exit 2 if unknown."""
    from runs.publish import get_run, run_dict

    obj.database()
    data = run_dict(get_run(run_id))
    if as_json:
        echo_json(data)
        return
    for key, value in data.items():
        click.echo(f"{key:>17}: {'' if value is None else value}")


@runs.command()
@click.option(
    "--batch", type=click.IntRange(1, 10_000), default=None, help="Rows per call (JOB_RUN_DRAIN_BATCH)."
)
@json_option('Print {"published", "stale", "failed", "dead"}.')
@click.pass_obj
def drain(obj: CliContext, batch: int | None, as_json: bool) -> None:
    """Publish run outbox rows whose first publish failed (the launcher also does this).

    A row whose payload is not its run's RunCommand is set aside (dead, with its reason) and the
    others are sent; its run stays queued and a launcher's rescan starts it.
    """
    from publisher.amqp import publisher_from_settings
    from runs.publish import RUN_OUTBOX, drain_job_runs

    obj.database()
    with publisher_from_settings(obj.settings) as publisher:
        report = drain_job_runs(
            publisher=publisher, batch=batch or obj.settings.job_run_drain_batch, audit=obj.audit()
        )
    if as_json:
        echo_json(report.as_json(RUN_OUTBOX.report_fields))
        return
    click.echo(
        f"published {report.published}, stale {report.stale}, failed {report.failed}, dead {report.dead}"
    )


@runs.command()
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Newest N rows.")
@json_option('Print {"count", "rows": [{"id", "run_id", "attempt", "dead_at", "reason", "payload"}]}.')
@click.pass_obj
def dead(obj: CliContext, limit: int, as_json: bool) -> None:
    """List run outbox rows the drain set aside (their payload is not their run's RunCommand).

    Newest first, with the reason. Their runs stay queued: a launcher's rescan starts them.
    """
    from runs.publish import dead_outbox_rows

    obj.database()
    echo_listing(
        as_json,
        "rows",
        dead_outbox_rows(limit=limit),
        as_dict=dict,
        headers=["id", "run_id", "attempt", "dead_at", "reason"],
        row=lambda r: [r["id"], r["run_id"], r["attempt"], r["dead_at"], r["reason"]],
        empty="no dead run outbox rows",
        right=["id", "attempt"],
    )


@runs.command()
@LIMIT_OPTION
@json_option('Print {"count", "jobs": [{"job", "overlap", ...}]}.')
@click.pass_obj
def catalog(obj: CliContext, limit: int, as_json: bool) -> None:
    """Validate the job catalog (JOB_CATALOG_PATH) and list its jobs and policies (a table)."""
    cat = _catalog(obj)
    jobs = [
        {
            "job": job.name,
            "overlap": job.overlap.value,
            "retries": job.retries,
            "expires_after_seconds": job.expires_after_seconds,
            "schedule": job.schedule,
            "successors": list(job.successors),
            "description": job.description,
        }
        for job in list(cat.jobs.values())[:limit]
    ]
    echo_listing(
        as_json,
        "jobs",
        jobs,
        as_dict=dict,
        headers=["job", "overlap", "retries", "schedule", "then"],
        row=lambda j: [j["job"], j["overlap"], j["retries"], j["schedule"] or "", ",".join(j["successors"])],
        empty="no jobs in the catalog",
        right=["retries"],
    )


def run_answer_command(json_help: str) -> Callable[[Callable[..., None]], click.Command]:
    """``kickoff runs NAME RUN_ID [--json]``: changes one run, answers with the publisher's exit codes."""

    def decorate(fn: Callable[..., None]) -> click.Command:
        fn = click.pass_obj(publisher_answers(fn))
        fn = json_option(json_help)(reason_option(required=False)(fn))
        return runs.command(epilog=EXIT_CODES_HELP)(click.argument("run_id")(fn))

    return decorate


@run_answer_command('Print {"run_id", "status", "reason"}.')
def cancel(obj: CliContext, run_id: str, reason: str | None, as_json: bool) -> None:
    """Cancel a queued run: it ends skipped (reason cancelled) and is never started.

    A running or ended run is a conflict (exit 4): cancel stops no process. Prints the new status.
    """
    from models.audit import AuditContext
    from runs.admin import cancel_run

    obj.database()
    run = cancel_run(run_id, audit=AuditContext(obj.actor, reason))
    data = {"run_id": str(run.id), "status": run.status, "reason": run.reason}
    echo_answer(as_json, data, f"{run.id} {run.job}: {run.status} ({run.reason})")


@run_answer_command('Print {"run_id", "job", "attempt", "status", "published"}.')
def retry(obj: CliContext, run_id: str, reason: str | None, as_json: bool) -> None:
    """Queue the next attempt of a failed or skipped run (beyond its retry budget).

    Prints `queued` (RabbitMQ confirmed the command) or `pending` (the drain publishes it) with the
    attempt. A queued, running or succeeded run is a conflict (exit 4).
    """
    from models.audit import AuditContext
    from publisher.amqp import publisher_from_settings
    from runs.admin import retry_run

    obj.database()
    with publisher_from_settings(obj.settings) as publisher:
        answer = retry_run(run_id, publisher=publisher, audit=AuditContext(obj.actor, reason))
    data = answer.as_dict()
    echo_answer(as_json, data, f"{data['status']} {answer.run_id} {answer.job} attempt {answer.attempt}")


@runs.command()
@click.argument("run_id")
@count_option("--lines", "-n", default=100, help="Last N lines.")
@json_option('Print {"run_id", "attempt", "log_path", "lines": [...]}.')
@click.pass_obj
def logs(obj: CliContext, run_id: str, lines: int, as_json: bool) -> None:
    """Print the last lines of the run's current attempt's log (DATA_DIR/runs/<job>/...)."""
    from runs.admin import run_log_tail

    obj.database()
    run, tail = run_log_tail(run_id, lines=lines)
    if as_json:
        echo_json({"run_id": str(run.id), "attempt": run.attempt, "log_path": run.log_path, "lines": tail})
        return
    for line in tail:
        click.echo(line)
