"""``kickoff console lockouts`` and ``unlock``: the console's sign-in locks, listed and lifted."""

from __future__ import annotations

import click

from cli.common import echo_answer, json_option, reason_option
from cli.context import CliContext
from cli.table import echo_listing


@click.group("console")
def console() -> None:
    """The operator console's sign-in locks (the console itself is served by `kickoff serve`).

    A key refused CONSOLE_SIGN_IN_FAILURES_PER_MINUTE times in a minute (behind `kickoff serve
    --proxy-headers`: a client address too) answers 429 until the minute has passed, or until an
    operator lifts the lock here (audited console.unlock).
    """


@console.command("lockouts")
@json_option('Print {"count", "lockouts": [{"bucket", "refusals", "last_refused_at", "key_name"}]}.')
@click.pass_obj
def lockouts_cmd(obj: CliContext, as_json: bool) -> None:
    """The locked buckets now: account:<digest of the presented key> (with the key's name when it is a
    stored key) or address:<client>, with their refusals in the last minute."""
    from dataclasses import asdict

    from api.console.throttle import locked

    obj.database()
    echo_listing(
        as_json,
        "lockouts",
        locked(limit=obj.settings.console_sign_in_failures_per_minute),
        as_dict=lambda x: {**asdict(x), "last_refused_at": x.last_refused_at.isoformat()},
        headers=["bucket", "refusals", "last_refused_at", "key"],
        row=lambda x: [x.bucket, x.refusals, x.last_refused_at.isoformat(), x.key_name or "-"],
        empty="no sign-in is locked",
    )


@console.command("unlock")
@click.argument("bucket", required=False)
@click.option("--all", "every", is_flag=True, help="Lift every lock (delete every counted refusal).")
@reason_option(required=False, help="Why the lock is lifted (required; kept in the audit log).")
@json_option('Print {"bucket", "cleared"}.')
@click.pass_obj
def unlock_cmd(obj: CliContext, bucket: str | None, every: bool, reason: str | None, as_json: bool) -> None:
    """Lift the sign-in lock of BUCKET (as `console lockouts` lists it) or of every bucket (--all):
    its counted refusals are deleted, audited (console.unlock) in the same transaction."""
    from api.console.throttle import unlock
    from models.audit import AuditContext

    if every == (bucket is not None):
        raise click.UsageError("give one BUCKET or --all")
    if not reason:
        raise click.UsageError("--reason is required (it goes into the audit log)")
    obj.database()
    cleared = unlock(bucket, audit=AuditContext(obj.actor, reason))
    echo_answer(
        as_json,
        {"bucket": bucket, "cleared": cleared},
        f"{bucket or 'every bucket'}: {cleared} refusals cleared",
    )
