"""``kickoff events``: the match event log's import from a DATA_DIR and its prune by age."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli.common import echo_json, json_option, reason_option
from cli.context import CliContext

#: Exit code of a prune refused while a match of its range is live.
EXIT_BUSY = 4


@click.group("events")
def events() -> None:
    """The match event log in PostgreSQL: import archive files, prune by age."""


@events.command("import")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The DATA_DIR whose listener/{league}/{shortcode}.json files to load (default: DATA_DIR).",
)
@json_option('Print {"files", "loaded", "already", "unreadable", "unknown": [files]}.')
@click.pass_obj
def import_cmd(obj: CliContext, data_dir: Path | None, as_json: bool) -> None:
    """Load an existing DATA_DIR's archive files into the event log.

    Idempotent and resumable: each distinct message is logged once (a file read again, or a message a
    listener logged already, adds nothing), one file at a time. Files of matches kickoff does not know
    are listed and skipped. Prints a progress bar, then what was loaded, already there and unreadable.
    """
    from lifecycle.event_log_admin import archive_files, import_archives

    obj.database()
    root = data_dir or Path(obj.settings.data_dir)
    files = archive_files(root)
    with click.progressbar(length=len(files), label="importing", file=sys.stderr) as bar:
        summary = import_archives(root, progress=lambda _path: bar.update(1))
    if as_json:
        echo_json(summary.as_dict())
        return
    click.echo(
        f"events: {summary.loaded} loaded, {summary.already} already there, {summary.unreadable} unreadable "
        f"from {summary.files} files"
    )
    for path in summary.unknown:
        click.echo(f"  skipped (no such match): {path}")


@events.command("prune")
@click.option("--older-than", "days", type=click.IntRange(min=1), required=True, help="Age in days.")
@reason_option(required=True)
@json_option('Print {"events", "keys", "partitions", "days"}.')
@click.pass_obj
def prune_cmd(obj: CliContext, days: int, reason: str, as_json: bool) -> None:
    """Delete the messages that arrived more than --older-than days ago (audited: events.prune).

    Months wholly before the cut-off lose their partition, the rest their rows. Refused (exit 4) while
    a match with messages in that range is live (a live or delayed status, or an open lifecycle row).
    """
    import sys

    from lifecycle.event_log_admin import prune_event_log
    from listener.errors import ArchiveBusy
    from models.audit import AuditContext

    obj.database()
    try:
        pruned = prune_event_log(days, audit=AuditContext(obj.actor, reason))
    except ArchiveBusy as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_BUSY)
    data = {"events": pruned.events, "keys": pruned.keys, "partitions": list(pruned.partitions), "days": days}
    if as_json:
        echo_json(data)
    else:
        click.echo(
            f"events: {pruned.events} messages older than {days} days deleted "
            f"({len(pruned.partitions)} monthly partitions dropped)"
        )
