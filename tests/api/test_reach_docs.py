"""The "What each key can reach" tables of docs/api.md and docs/console.md are the generated ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.reach import api_reach_table, console_reach_table

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def app():
    from api.app import create_app

    return create_app()


@pytest.mark.parametrize(("doc", "table"), [("api.md", api_reach_table), ("console.md", console_reach_table)])
def test_the_documents_table_is_generated_from_the_declarations(app, doc, table):
    text = (DOCS / doc).read_text()
    assert "## What each key can reach" in text
    assert table(app) in text, f"docs/{doc}: paste api.reach.{table.__name__}(create_app()) over its table"


def test_a_trigger_key_reaches_no_read_route_and_only_admins_manage_keys(app):
    rows = api_reach_table(app).splitlines()[2:]
    for row in rows:
        _route, read, trigger, operator, admin = (c.strip() for c in row.strip("|").split("|"))
        if "apikeys" in row:
            assert (read, trigger, operator, admin) == ("-", "-", "-", "yes")
        if row.startswith("| `GET /v1/"):
            assert trigger == "-"
