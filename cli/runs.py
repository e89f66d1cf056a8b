"""``kickoff runs``: publish a catalog job, list and show runs, drain the run outbox, show the catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cli.answers import EXIT_CODES_HELP, publisher_answers
from cli.common import echo_json, parse_assignments
from cli.context import CliContext
from models.run_log import RunLog, RunStatus, Trigger

if TYPE_CHECKING:
    from publisher.catalog import Catalog


def _catalog(obj: CliContext) -> Catalog:
    from publisher.catalog import load_catalog

    return load_catalog(obj.settings.job_catalog_path)


def run_dict(run: RunLog) -> dict[str, Any]:
    """A run_log row as a JSON-ready dict."""
    return {
        "run_id": str(run.id),
        "job": run.job,
        "trigger": run.trigger,
        "dedupe_key": run.dedupe_key,
        "status": run.status,
        "reason": run.reason,
        "attempt": run.attempt,
        "retry_budget": run.retry_budget,
        "params": run.params,
        "parent_id": None if run.parent_id is None else str(run.parent_id),
        "chain_root": None if run.chain_root is None else str(run.chain_root),
        "queued_at": run.queued_at,
        "expires_at": run.expires_at,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "duration_seconds": run.duration_seconds,
        "exit_code": run.exit_code,
        "log_path": run.log_path,
        "host": run.host,
        "pid": run.pid,
        "error": run.error,
    }


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
    default=Trigger.CLI.value,
    show_default=True,
    help="Who asks; each run gets a fresh dedupe key (its run id).",
)
@click.option(
    "--json", "as_json", is_flag=True, help='Print {"status": ..., "run_id": ..., "published": ..., ...}.'
)
@click.pass_obj
@publisher_answers
def publish(obj: CliContext, job: str, params: tuple[str, ...], trigger: str, as_json: bool) -> None:
    """Publish a run of catalog job JOB (params are checked against its schema).

    Values of --param are JSON when they parse as JSON (--param seconds=2 is a number), else
    strings. Prints `queued` (RabbitMQ confirmed the command) or `pending` (saved; RabbitMQ did
    not confirm it, the drain publishes it later and a launcher's rescan starts it anyway) with
    the run id. Params that do not match the job's schema are invalid (exit 3).
    """
    from publisher.amqp import publisher_from_settings
    from publisher.runs import publish_run

    values = parse_assignments(params, option="--param")
    catalog = _catalog(obj)
    obj.database()
    with publisher_from_settings(obj.settings) as publisher:
        result = publish_run(job, values, trigger=trigger, catalog=catalog, publisher=publisher)
    if as_json:
        echo_json(result.to_dict())
        return
    note = " (saved; not yet published, the drain retries)" if result.status == "pending" else ""
    click.echo(f"{result.status} {result.run_id} {result.job}{note}")


@runs.command(name="list")
@click.option("--job", default=None, help="Only runs of this job.")
@click.option(
    "--status", type=click.Choice([s.value for s in RunStatus]), default=None, help="Only this status."
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Newest N runs.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
@click.pass_obj
def list_runs(obj: CliContext, job: str | None, status: str | None, limit: int, as_json: bool) -> None:
    """List recent runs, newest first: id, job, trigger, status, attempt, exit code."""
    from publisher.runs import recent_runs

    obj.database()
    for run in recent_runs(job=job, status=status, limit=limit):
        if as_json:
            echo_json(run_dict(run))
            continue
        outcome = run.status + (f" ({run.reason})" if run.reason else "")
        code = "" if run.exit_code is None else f" exit={run.exit_code}"
        click.echo(f"{run.id}  {run.job:<20} {run.trigger:<8} {outcome:<20} attempt={run.attempt}{code}")


@runs.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def show(obj: CliContext, run_id: str, as_json: bool) -> None:
    """Show one run: trigger, dedupe key, attempts, times, exit code, log file. Exit 2 if unknown."""
    from publisher.runs import get_run

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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def drain(obj: CliContext, batch: int | None, as_json: bool) -> None:
    """Publish run outbox rows whose first publish failed (the launcher also does this)."""
    from publisher.amqp import publisher_from_settings
    from publisher.runs import drain_job_runs

    obj.database()
    with publisher_from_settings(obj.settings) as publisher:
        report = drain_job_runs(publisher=publisher, batch=batch or obj.settings.job_run_drain_batch)
    if as_json:
        echo_json({"published": report.published, "stale": report.stale, "failed": report.failed})
        return
    click.echo(f"published {report.published}, stale {report.stale}, failed {report.failed}")


@runs.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per job.")
@click.pass_obj
def catalog(obj: CliContext, as_json: bool) -> None:
    """Validate the job catalog (JOB_CATALOG_PATH) and list its jobs and policies."""
    cat = _catalog(obj)
    for job in cat.jobs.values():
        data = {
            "job": job.name,
            "overlap": job.overlap.value,
            "retries": job.retries,
            "expires_after_seconds": job.expires_after_seconds,
            "schedule": job.schedule,
            "successors": list(job.successors),
            "description": job.description,
        }
        if as_json:
            echo_json(data)
        else:
            extra = f" schedule={job.schedule!r}" if job.schedule else ""
            chain = f" then {','.join(job.successors)}" if job.successors else ""
            click.echo(f"{job.name:<20} overlap={job.overlap.value} retries={job.retries}{extra}{chain}")
