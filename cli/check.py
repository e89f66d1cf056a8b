"""``kickoff check``: what is wrong, service by service, and what to look at (one line per check)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import click

from cli.common import echo_json, json_option
from cli.context import CliContext
from config.errors import KickoffError
from config.settings import mask_url

OK, WARN, FAIL = "ok", "warn", "FAIL"


@dataclass(frozen=True)
class Check:
    """One answer of ``kickoff check``: ok, warn (worth a look, exit 0) or FAIL (exit 1)."""

    name: str
    status: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


def service_checks(obj: CliContext) -> list[Check]:
    """Each backing service answers at its configured address (RabbitMQ: the outbox queues exist):
    the probes of api.probes, on this command's handles (the database bound once, a new AMQP
    connection per probe)."""
    from api.probes import Services, ask_all
    from publisher.amqp import publisher_from_settings

    services = Services(
        settings=obj.settings,
        bind_database=obj.database,
        coordination=lambda: obj.coordination,
        amqp=lambda: publisher_from_settings(obj.settings),
    )
    return [Check(a.probe.name, OK if a.ok else FAIL, a.detail) for a in ask_all(services)]


def _migrations(obj: CliContext) -> Check:
    from models.migrate import migration_status

    try:
        status = migration_status(obj.settings.database_url)
    except KickoffError as exc:
        return Check("migrations", FAIL, str(exc))
    if status.pending:
        return Check(
            "migrations",
            FAIL,
            f"{len(status.pending)} pending ({', '.join(status.pending)}): run kickoff db migrate",
        )
    return Check("migrations", OK, f"all {len(status.applied)} applied")


def _audit_role() -> Check:
    """FAIL while DATABASE_URL's role could rewrite the audit log (owner, superuser, UPDATE...)."""
    from models.roles import audit_rewrite_privileges

    try:
        found = audit_rewrite_privileges()
    except KickoffError as exc:
        return Check("audit log", FAIL, f"not checked: {exc}")
    if found:
        return Check(
            "audit log",
            FAIL,
            f"DATABASE_URL's role can rewrite it ({', '.join(found)}): set DATABASE_OWNER_URL to the owner"
            " and DATABASE_URL to an app role, then run kickoff db migrate (docs/lifecycle.md)",
        )
    return Check("audit log", OK, "append-only for DATABASE_URL's role (INSERT and SELECT only)")


def _stored_settings(obj: CliContext) -> Check:
    from lifecycle.match_admin import matches_with_refused_settings

    try:
        found = matches_with_refused_settings()
    except KickoffError as exc:
        return Check("match settings", FAIL, f"not checked: {exc}")
    if not found:
        return Check("match settings", OK, "no stored match setting a run may not set")
    shown = "; ".join(f"match {mid}: {', '.join(keys)}" for mid, keys in found[:5])
    more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
    return Check(
        "match settings",
        FAIL,
        f"{len(found)} match(es) hold settings only the process environment sets, their starts fail: "
        f"{shown}{more} (kickoff matches edit MATCH --unset KEY)",
    )


def _leagues() -> Check:
    from lifecycle.leagues import undeclared_leagues
    from models.leagues import declared

    try:
        found = undeclared_leagues()
    except KickoffError as exc:
        return Check("leagues", FAIL, f"not checked: {exc}")
    names = ", ".join(d.name for d in declared())
    if not found:
        return Check("leagues", OK, f"every league in the database is declared ({names})")
    return Check(
        "leagues",
        WARN,
        f"{', '.join(found)}: no declaration (models.leagues), their matches are recorded only, "
        "no question is issued (docs/adding-a-league.md)",
    )


def _queues(obj: CliContext) -> Iterator[Check]:
    from actors.broker import queue_reports

    try:
        reports = queue_reports(obj.settings)
    except KickoffError as exc:
        yield Check("workers", FAIL, f"not checked: {exc}")
        return
    for r in reports:
        if r.workers:
            yield Check(f"workers on {r.queue}", OK, f"{len(r.workers)} alive ({', '.join(r.workers)})")
        else:
            yield Check(
                f"workers on {r.queue}", FAIL, f"no worker alive (dramatiq actors --queues {r.queue})"
            )
        status = WARN if r.dead else OK
        dead = f", {r.dead} dead-lettered (kickoff dead-letters list)" if r.dead else ", 0 dead-lettered"
        yield Check(f"queue {r.queue}", status, f"{r.waiting} waiting, {r.delayed} delayed{dead}")


def _scheduler(obj: CliContext) -> Check:
    from config.clock import utcnow

    s = obj.settings
    try:
        now = utcnow()
        minutes = int(s.scheduler_alive_seconds // 60) + 1
        for back in range(minutes + 1):
            if obj.coordination.ticks.any_tick_at(now - timedelta(minutes=back)):
                ago = "this minute" if back == 0 else f"{back} min ago"
                return Check("scheduler", OK, f"sent a tick {ago}")
    except KickoffError as exc:
        return Check("scheduler", FAIL, f"not checked: {exc}")
    return Check(
        "scheduler",
        FAIL,
        f"no tick in the last {s.scheduler_alive_seconds:g} s (is `kickoff scheduler` running?)",
    )


def _feed(obj: CliContext) -> Check:
    import requests

    url = obj.settings.sportradar_base_url
    try:
        requests.get(url, timeout=5)
    except requests.RequestException as exc:
        reason = str(exc).splitlines()[0][:200]
        return Check("feed", FAIL, f"cannot reach the feed at SPORTRADAR_BASE_URL={mask_url(url)}: {reason}")
    return Check("feed", OK, f"answers at SPORTRADAR_BASE_URL={mask_url(url)}")


def _tracing() -> Check:
    """Where this machine's processes send spans (their OTEL_* variables, as set here)."""
    from config import tracing

    try:
        config = tracing.read_config(service="each process's own (kickoff-api, kickoff-worker, ...)")
        tracing.check_config(config)
    except KickoffError as exc:
        return Check("tracing", FAIL, str(exc))
    away = tracing.collector_answers(config)
    if away is not None:
        detail = f"{config.describe()}; the collector does not answer ({away}): spans are dropped"
        return Check("tracing", WARN, detail)
    return Check("tracing", OK, config.describe())


def full_checks(obj: CliContext) -> list[Check]:
    """Services, migrations, workers per queue, queue depths and dead letters, the scheduler, the feed,
    where spans go."""
    checks = service_checks(obj)
    by_name = {c.name: c for c in checks}
    if by_name["PostgreSQL"].status == OK:
        checks.append(_migrations(obj))
        if checks[-1].status == OK:
            checks.append(_stored_settings(obj))
            checks.append(_leagues())
            checks.append(_audit_role())
    checks.extend(_queues(obj))
    if by_name["Redis"].status == OK:
        checks.append(_scheduler(obj))
    checks.append(_feed(obj))
    checks.append(_tracing())
    return checks


@click.command()
@click.option(
    "--services",
    "services_only",
    is_flag=True,
    help="Only check that each service answers (as a deploy does first).",
)
@json_option('Print {"ok": bool, "checks": [{"name", "status", "detail"}]}.')
@click.pass_obj
def check(obj: CliContext, services_only: bool, as_json: bool) -> None:
    """Tell what is wrong: one line per check, "ok", "warn" or "FAIL" first; exit 1 on any FAIL.

    \b
    PostgreSQL, Redis, the Dramatiq broker, RabbitMQ (and its outbox queues) answer;
    migrations applied; no match stores a setting a run may not set (docs/lifecycle.md);
    every league in the database is declared (warn: an undeclared one is recorded only);
    DATABASE_URL's role cannot rewrite the audit log (FAIL as owner or superuser);
    a worker alive on each queue (default, match_listeners);
    each queue's waiting, delayed and dead-lettered messages (dead letters: warn);
    the scheduler sent a tick recently (SCHEDULER_ALIVE_SECONDS); the feed answers;
    where spans go (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT: warn when the collector
    does not answer, FAIL for a value kickoff cannot use; docs/tracing.md).

    Each failure names the setting to look at (DATABASE_URL, REDIS_URL, BROKER_URL, AMQP_URL,
    SPORTRADAR_BASE_URL) or the command that fixes it.
    """
    checks = service_checks(obj) if services_only else full_checks(obj)
    ok = all(c.status != FAIL for c in checks)
    if as_json:
        echo_json({"ok": ok, "checks": [c.as_dict() for c in checks]})
    else:
        for c in checks:
            click.echo(f"{c.status:<5} {c.name}: {c.detail}")
    if not ok:
        raise SystemExit(1)
