"""``kickoff db``: create the database and apply schema migrations."""

from __future__ import annotations

import click

from cli.common import echo_json, json_option
from cli.context import CliContext
from cli.table import echo_table
from models.migrate import migrate as apply_migrations
from models.migrate import migration_status


@click.group()
def db() -> None:
    """Manage the PostgreSQL schema (DATABASE_URL)."""


@db.command()
@json_option('Print {"database", "created_database", "applied": [...], "app_role": name or null}.')
@click.pass_obj
def migrate(obj: CliContext, as_json: bool) -> None:
    """Create the database if missing, apply pending migrations and set up the app's role.

    Runs as DATABASE_OWNER_URL's role (else DATABASE_URL's). When DATABASE_URL names another
    user, that role is created or updated (its password from DATABASE_URL) and granted what the
    processes need: the audit log only INSERT and SELECT. Writes AUDIT_RETENTION_DAYS as the
    floor of the audit log's retention. Idempotent: a second run applies nothing and says so.
    """
    from models.roles import ensure_app_role

    owner_url = obj.settings.database_owner_url or obj.settings.database_url
    report = apply_migrations(owner_url)
    role = ensure_app_role(
        owner_url=owner_url,
        app_url=obj.settings.database_url,
        retention_floor_days=obj.settings.audit_retention_days,
    )
    if as_json:
        echo_json(
            {
                "database": report.database,
                "created_database": report.created_database,
                "applied": list(report.applied),
                "app_role": None if role is None else role.role,
            }
        )
        return
    if role is not None:
        click.echo(f"app role {role.role} {'created' if role.created else 'updated'}")
    if report.created_database:
        click.echo(f"created database {report.database}")
    if report.applied:
        for mid in report.applied:
            click.echo(f"applied {mid}")
    else:
        click.echo(f"database {report.database} is up to date (nothing to apply)")


@db.command("status")
@json_option('Print {"database", "applied": [...], "pending": [...]}.')
@click.pass_obj
def status(obj: CliContext, as_json: bool) -> None:
    """Show applied and pending migrations: one line per migration; exit 1 when any is pending."""
    report = migration_status(obj.settings.database_url)
    if as_json:
        echo_json(
            {"database": report.database, "applied": list(report.applied), "pending": list(report.pending)}
        )
    else:
        echo_table(
            ("state", "migration"),
            [*(("applied", mid) for mid in report.applied), *(("pending", mid) for mid in report.pending)],
            empty="no migrations",
        )
        if report.pending:
            click.echo(f"{len(report.pending)} pending: run kickoff db migrate")
        else:
            click.echo(f"database {report.database} is up to date")
    if report.pending:
        raise SystemExit(1)
