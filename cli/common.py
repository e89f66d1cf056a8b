"""Shared CLI helpers: KEY=VALUE parsing (--setting), JSON output, count options (--limit), match ids."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from config.assignments import split_assignment

F = TypeVar("F", bound=Callable[..., Any])


def parse_assignments(pairs: Iterable[str], *, option: str) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings; values are JSON when they parse as JSON, else strings."""
    out: dict[str, Any] = {}
    for pair in pairs:
        parsed = split_assignment(pair)
        if parsed is None:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        out[parsed[0]] = parsed[1]
    return out


def echo_json(obj: dict[str, Any]) -> None:
    """Print one JSON document, an object, on one line (for scripts); lists go under a key."""
    if not isinstance(obj, dict):
        raise TypeError(f"--json output must be one object, not {type(obj).__name__}")
    click.echo(json.dumps(obj, default=str, sort_keys=True))


def echo_answer(as_json: bool, data: dict[str, Any], text: str) -> None:
    """Print a command's answer: with --json ``data`` as one JSON object, else the line ``text``."""
    if as_json:
        echo_json(data)
    else:
        click.echo(text)


def count_option(*names: str, default: int | None, minimum: int = 1, help: str) -> Callable[[F], F]:
    """A whole-number option of at least ``minimum`` (a smaller one is a usage error); a default
    other than None shows in --help."""
    return click.option(
        *names, type=click.IntRange(min=minimum), default=default, show_default=default is not None, help=help
    )


def settings_option(help: str) -> Callable[[F], F]:
    """``--setting KEY=VALUE`` (repeatable): listener settings as a dict (``settings_``; JSON values
    where they parse as JSON, see parse_assignments); ``help`` says whose settings they are."""

    def parse(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> dict[str, Any]:
        return parse_assignments(value, option="--setting")

    return click.option(
        "--setting", "settings_", multiple=True, metavar="KEY=VALUE", callback=parse, help=help
    )


def json_option(help: str) -> Callable[[F], F]:
    """``--json``: print one JSON object instead of text (``as_json``); ``help`` names what it holds."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def reason_option(*, required: bool, help: str | None = None) -> Callable[[F], F]:
    """``--reason TEXT``: why the operator acts, kept in the audit log (``reason``); a required one
    missing or blank, or one breaking the text rule (a NUL, bytes that are not UTF-8, over 2000
    characters), is a usage error (exit 2) before anything is done."""

    def check(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
        from config.errors import InvalidText
        from config.text_rule import text_problem

        text = (value or "").strip()
        if required and not text:
            raise click.BadParameter(
                "a reason is required (it goes into the audit log)", param_hint="--reason"
            )
        problem = text_problem(text)  # the one text rule (config.text_rule): refused before any act
        if problem:
            raise click.BadParameter(str(InvalidText(f"the reason {problem}")), param_hint="--reason")
        return text or None

    return click.option(
        "--reason",
        metavar="TEXT",
        default=None,
        required=required,
        callback=check,
        help=help or ("Why (required; " if required else "Why (optional; ") + "kept in the audit log).",
    )


#: ``--limit N`` of every listing (the newest/first N rows; 0 is refused).
LIMIT_OPTION = count_option("--limit", default=100, help="Show at most this many rows.")


class MatchIdType(click.ParamType):
    """A match by its internal Match.id or its sr_id (lifecycle.match_ref); converts to the internal id.

    The value is looked up in the database (DATABASE_URL): as an internal id first, then as an
    sr_id (provider ids may be UUIDs too); an unknown one is one clear line.
    """

    name = "MATCH_ID"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from cli.context import CliContext
        from lifecycle.match_ref import resolve_match_id
        from models.errors import MatchNotFound

        text = str(value).strip()
        if not text:
            self.fail("a match id or sr_id is required", param, ctx)
        obj = ctx.find_object(CliContext) if ctx is not None else None
        if obj is None:
            self.fail(f"{text!r}: no database to look the match up in", param, ctx)
        obj.database()
        try:
            return resolve_match_id(text)
        except MatchNotFound as exc:
            self.fail(str(exc), param, ctx)


MATCH_ID = MatchIdType()
