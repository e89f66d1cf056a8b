"""GET /asyncapi.yaml and /asyncapi.json of a real `kickoff serve`: no key, docs/asyncapi.yaml served."""

from __future__ import annotations

from pathlib import Path

import httpx
import yaml

from tests.api.conftest import bearer

DOCS = Path(__file__).resolve().parents[2] / "docs" / "asyncapi.yaml"


def test_both_contract_documents_are_served_without_a_key_and_are_docs_asyncapi_yaml(api_server, db):
    expected = yaml.safe_load(DOCS.read_text())
    as_yaml = httpx.get(api_server.url + "/asyncapi.yaml", timeout=60)
    assert as_yaml.status_code == 200, as_yaml.text
    assert as_yaml.headers["content-type"].startswith("application/yaml")
    assert as_yaml.text == DOCS.read_text()
    assert yaml.safe_load(as_yaml.text) == expected
    as_json = httpx.get(api_server.url + "/asyncapi.json", timeout=60)
    assert as_json.status_code == 200, as_json.text
    assert as_json.headers["content-type"].startswith("application/json")
    assert as_json.json() == expected
    assert as_json.json()["asyncapi"].startswith("3.")


def test_the_contract_is_served_whatever_key_comes_with_the_request(api_server, keys):
    for key in ("kk_not-a-key", *keys.values()):
        for path in ("/asyncapi.yaml", "/asyncapi.json"):
            answer = httpx.get(api_server.url + path, headers=bearer(key), timeout=60)
            assert answer.status_code == 200, (path, answer.text)
