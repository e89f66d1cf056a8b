"""The contract as shipped: publisher/asyncapi.yaml is a link to docs/asyncapi.yaml, an installed wheel
reads it, and each channel's summary (queue, required fields, examples) is what the document says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft7Validator, FormatChecker

from publisher.contract import (
    ExampleSource,
    channel_contracts,
    contract_json,
    contract_text,
    load_contract,
    resolve,
)

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "asyncapi.yaml"
PACKAGED = REPO / "publisher" / "asyncapi.yaml"


def docs_contract() -> dict:
    return yaml.safe_load(DOCS.read_text())


def test_the_packaged_contract_is_a_link_to_docs_asyncapi_yaml():
    assert PACKAGED.is_symlink() and PACKAGED.resolve() == DOCS.resolve(), (
        "publisher/asyncapi.yaml must be the symlink ../docs/asyncapi.yaml (one file to edit): "
        "ln -sf ../docs/asyncapi.yaml publisher/asyncapi.yaml"
    )
    assert contract_text() == DOCS.read_text()


def test_the_json_form_is_the_same_document():
    assert json.loads(contract_json()) == docs_contract() == load_contract()


def test_every_channel_summary_is_what_the_contract_says():
    doc = docs_contract()
    summaries = channel_contracts()
    assert [c.queue for c in summaries] == [c["address"] for c in doc["channels"].values()]
    for summary, channel in zip(summaries, doc["channels"].values(), strict=True):
        names = [ref["$ref"].rsplit("/", 1)[1] for ref in channel["messages"].values()]
        assert [m.name for m in summary.messages] == names
        for m in summary.messages:
            raw = doc["components"]["messages"][m.name]
            payload = doc["components"]["schemas"][raw["payload"]["$ref"].rsplit("/", 1)[1]]
            assert m.required == tuple(payload["required"])
            assert [f.name for f in m.fields] == list(payload["properties"])
            assert [f.name for f in m.fields if f.required] == [
                p for p in payload["properties"] if p in payload["required"]
            ]
            assert [e.payload for e in m.examples] == [e["payload"] for e in raw["examples"]]
            assert {e.source for e in m.examples} == {ExampleSource.CONTRACT}
            assert "$ref" not in str(m.schema)


def test_a_message_without_examples_gets_one_generated_from_its_schema_that_validates():
    doc = docs_contract()
    for message in doc["components"]["messages"].values():
        message.pop("examples", None)
    summaries = channel_contracts(doc)
    assert summaries
    for channel in summaries:
        for m in channel.messages:
            [example] = m.examples
            assert example.source is ExampleSource.SCHEMA
            Draft7Validator(m.schema, format_checker=FormatChecker()).validate(example.payload)
            assert set(example.payload) == set(m.required)


def test_a_reference_cycle_is_kept_as_a_reference():
    node = "#/components/schemas/Node"
    doc = {"components": {"schemas": {"Node": {"type": "object", "properties": {"next": {"$ref": node}}}}}}
    assert resolve(doc, {"$ref": node}) == {"type": "object", "properties": {"next": {"$ref": node}}}


@pytest.mark.services  # pip builds the wheel through the package index (build isolation)
@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_an_installed_wheel_reads_the_contract_without_a_checkout(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.cfg", "README.md"):
        shutil.copy(REPO / name, source / name)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)], check=True)
    [wheel] = (tmp_path / "dist").glob("kickoff-*.whl")
    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "-q", "--target", str(target), str(wheel)], check=True)
    probe = (
        "import publisher, publisher.contract as c; print(publisher.__file__); "
        "print(len(c.channel_contracts())); print(c.contract_text(), end='')"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    ran = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    where, count, text = ran.stdout.split("\n", 2)
    assert Path(where).is_relative_to(target), where
    assert int(count) == len(docs_contract()["channels"])
    assert text == DOCS.read_text()
