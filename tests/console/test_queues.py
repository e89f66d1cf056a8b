"""The console's Queues page (the queue contract explorer) over HTTP, compared with docs/asyncapi.yaml."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.services

DOCS = Path(__file__).resolve().parents[2] / "docs" / "asyncapi.yaml"


def _ref(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """What a ``{"$ref": "#/a/b"}`` of the contract points to (the node itself when it is no ref)."""
    if "$ref" not in node:
        return node
    for part in node["$ref"][2:].split("/"):
        doc = doc[part]
    return doc


def _block(page: str, opening: str, closing: str) -> str:
    start = page.index(opening)
    return page[start : page.index(closing, start)]


@pytest.mark.parametrize("scope", ["read", "operator"])
def test_the_queues_page_lists_every_channel_of_the_contract_with_its_required_fields(
    console_server, console_keys, signed_in, scope
):
    session = signed_in(console_keys[scope])
    page = session.client.get("/queues")
    assert page.status_code == 200, page.text
    assert '<a href="/queues">Queues</a>' in page.text
    assert 'href="/asyncapi.yaml"' in page.text and 'href="/asyncapi.json"' in page.text
    doc = yaml.safe_load(DOCS.read_text())
    assert re.findall(r'<section class="queue"[^>]* data-queue="([^"]+)"', page.text) == [
        c["address"] for c in doc["channels"].values()
    ]
    for channel in doc["channels"].values():
        section = _block(page.text, f'data-queue="{channel["address"]}"', "</section>")
        assert channel["description"].strip() in html.unescape(section)
        for ref in channel["messages"].values():
            message = _ref(doc, ref)
            payload = _ref(doc, message["payload"])
            article = _block(section, f'data-message="{message["name"]}"', "</article>")
            shown = [
                html.unescape(r) for r in re.findall(r'<code class="required-field">([^<]*)</code>', article)
            ]
            assert shown == payload["required"], message["name"]
            rows = dict(re.findall(r'<tr data-field="([^"]+)" data-required="(yes|no)"', article))
            assert rows == {p: "yes" if p in payload["required"] else "no" for p in payload["properties"]}
            examples = re.findall(
                r'<pre class="json"[^>]* data-example="contract">(.*?)</pre>', article, re.S
            )
            assert [json.loads(html.unescape(e)) for e in examples] == [
                e["payload"] for e in message["examples"]
            ]
            [schema] = re.findall(r'<pre class="json"[^>]* data-schema="[^"]+">(.*?)</pre>', article, re.S)
            assert json.loads(html.unescape(schema))["required"] == payload["required"]


def test_the_nav_links_the_queues_page_on_every_page(console_server, console_keys, signed_in):
    session = signed_in(console_keys["read"])
    for path in ("/", "/outbox", "/runs", "/actions"):
        assert '<a href="/queues">Queues</a>' in session.client.get(path).text, path
