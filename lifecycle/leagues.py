"""League administration: names checked against the archive-path rule, unique case-insensitively."""

from __future__ import annotations

from config.errors import ConstraintViolation
from lifecycle.errors import InvalidLeagueName, LeagueExists, LeagueNotFound
from listener.archive import safe_component
from listener.errors import ArchivePathError
from models.audit import AuditContext
from models.boundary import connection, transaction
from models.league import League, all_league_names, create_league, league_named, set_league_enabled_row
from models.leagues import declaration


def check_league_name(name: str) -> str:
    """Return ``name`` when it is one safe archive path component as given, else raise InvalidLeagueName."""
    try:
        cleaned = safe_component(name, what="league")
    except ArchivePathError as exc:
        raise InvalidLeagueName(f"league name {name!r} is not allowed: {exc}") from exc
    if cleaned != name:
        raise InvalidLeagueName(
            f"league name {name!r} is not allowed: use letters, digits, '.', '_' and '-' only"
        )
    return name


def find_league(name: str) -> League | None:
    """The league named ``name``, compared case-insensitively, or None."""
    return league_named(name)


def league_names() -> list[str]:
    """Every league's name, sorted (the console's league choices)."""
    return all_league_names()


def undeclared_leagues() -> list[str]:
    """The leagues of the database with no declaration (models.leagues): dispatched for recording only."""
    with connection():
        names = all_league_names()
    return [name for name in names if declaration(name) is None]


def get_league(name: str) -> League:
    """The league named ``name`` (case-insensitive), or LeagueNotFound naming the command to add it."""
    league = find_league(name)
    if league is None:
        raise LeagueNotFound(f"no league named {name!r} (kickoff leagues add {name})")
    return league


def ensure_league(name: str) -> League:
    """The league named ``name`` (case-insensitive), created in lower case when missing (refresh)."""
    league = find_league(name)
    if league is not None:
        return league
    try:
        with transaction():
            return create_league(name.lower())
    except ConstraintViolation:
        return get_league(name)  # another refresh created it meanwhile


def add_league(name: str, *, enabled: bool = True, audit: AuditContext | None = None) -> League:
    """Create league ``name``; refuses a bad name or one that exists in any case. With ``audit``, the
    league and its entry (league.add) are written in one transaction."""
    check_league_name(name)
    existing = find_league(name)
    if existing is not None:
        raise LeagueExists(f"league {existing.name!r} already exists")
    try:
        with transaction():
            league = create_league(name, enabled=enabled)
            if audit is not None:
                audit.record("league.add", "league", league.name, after={"enabled": enabled})
    except ConstraintViolation as exc:
        raise LeagueExists(f"league {name!r} already exists") from exc
    return league


def set_league_enabled(
    name: str,
    enabled: bool,
    *,
    audit: AuditContext | None = None,
) -> tuple[League, bool]:
    """Enable or disable league ``name``; returns the league and whether it was enabled before.

    With ``audit``, the change is audited (league.enable/disable) in the update's transaction.
    """
    league = get_league(name)
    before = bool(league.enabled)
    with transaction():
        set_league_enabled_row(league.id, enabled)
        if audit is not None:
            audit.record(
                "league.enable" if enabled else "league.disable",
                "league",
                league.name,
                before={"enabled": before},
                after={"enabled": enabled},
            )
    league.enabled = enabled
    return league, before
