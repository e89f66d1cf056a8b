"""The queues' AsyncAPI contract as shipped in the package, and what each of its channels carries.

``docs/asyncapi.yaml`` is the one file; ``publisher/asyncapi.yaml`` is a symlink to it (package
data: a checkout and an editable install read it through the link, a wheel or sdist build copies
the target in), so an installed kickoff serves the same document as a checkout.
``tests/publisher/test_contract_package.py`` checks the link and an installed wheel.

``check_trigger_queue`` holds a trigger queue's declaration (``publisher.trigger_queues``) to the
contract: its channel exists, binds its queue and carries its message, whose payload is the
message envelope plus the request's published fields, of types the request model allows.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any

import yaml

from publisher.errors import ContractMismatch
from publisher.trigger_queues import TriggerQueue
from publisher.validation import REQUEST_ONLY_FIELDS

#: docs/asyncapi.yaml inside this package (a symlink in a checkout, the file in a wheel).
CONTRACT_FILE = "asyncapi.yaml"


class ExampleSource(StrEnum):
    """Where an example payload comes from."""

    CONTRACT = "contract"  # written in the contract (the message's examples)
    SCHEMA = "schema"  # generated from the payload schema: the contract has no example of the message


@dataclass(frozen=True)
class Field:
    """One top-level property of a payload: its type, whether it is required, what it is, its constraints."""

    name: str
    type: str
    required: bool
    description: str
    constraints: tuple[str, ...]


@dataclass(frozen=True)
class Example:
    """An example payload of a message."""

    name: str
    payload: Any
    source: ExampleSource


@dataclass(frozen=True)
class MessageContract:
    """One message a channel carries: its payload schema ($refs inlined), required fields, examples."""

    name: str
    title: str
    schema_name: str
    schema: dict[str, Any]
    required: tuple[str, ...]
    fields: tuple[Field, ...]
    examples: tuple[Example, ...]


@dataclass(frozen=True)
class ChannelContract:
    """One channel of the contract: its queue and the messages published to it."""

    id: str
    queue: str
    description: str
    messages: tuple[MessageContract, ...]


@cache
def contract_text() -> str:
    """The contract as shipped (YAML text), read once per process."""
    return resources.files("publisher").joinpath(CONTRACT_FILE).read_text(encoding="utf-8")


@cache
def _parsed() -> dict[str, Any]:
    return yaml.safe_load(contract_text())


def load_contract() -> dict[str, Any]:
    """The contract parsed (a fresh copy the caller may change)."""
    return copy.deepcopy(_parsed())


@cache
def contract_json() -> str:
    """The contract as a JSON document (the same document as the YAML)."""
    return json.dumps(_parsed(), ensure_ascii=False)


def channel_contracts(document: dict[str, Any] | None = None) -> tuple[ChannelContract, ...]:
    """Every channel of ``document`` (default: the shipped contract) in the contract's order."""
    doc = _parsed() if document is None else document
    out = []
    for channel_id, channel in (doc.get("channels") or {}).items():
        queue = (((channel.get("bindings") or {}).get("amqp") or {}).get("queue") or {}).get("name")
        messages = tuple(
            _message(doc, key, _pointer(doc, m["$ref"]) if "$ref" in m else m)
            for key, m in (channel.get("messages") or {}).items()
        )
        out.append(
            ChannelContract(
                id=channel_id,
                queue=str(queue or channel.get("address", channel_id)),
                description=str(channel.get("description", "")).strip(),
                messages=messages,
            )
        )
    return tuple(out)


def _message(doc: dict[str, Any], key: str, message: dict[str, Any]) -> MessageContract:
    raw_payload = message.get("payload") or {}
    ref = raw_payload.get("$ref", "") if isinstance(raw_payload, dict) else ""
    schema = resolve(doc, raw_payload)
    required = tuple(schema.get("required", ()))
    props = schema.get("properties") or {}
    fields = tuple(
        Field(
            name=name,
            type=type_of(spec),
            required=name in required,
            description=str(spec.get("description", "")).strip(),
            constraints=constraints_of(spec),
        )
        for name, spec in props.items()
    )
    examples = tuple(
        Example(name=str(e.get("name", f"example {n}")), payload=e["payload"], source=ExampleSource.CONTRACT)
        for n, e in enumerate(message.get("examples") or (), start=1)
        if "payload" in e
    )
    if not examples:
        examples = (Example(name="generated", payload=example_of(schema), source=ExampleSource.SCHEMA),)
    return MessageContract(
        name=str(message.get("name", key)),
        title=str(message.get("title", message.get("name", key))),
        schema_name=ref.rsplit("/", 1)[-1],
        schema=schema,
        required=required,
        fields=fields,
        examples=examples,
    )


def resolve(doc: dict[str, Any], node: Any, _seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every local ``$ref`` (``#/...``) replaced by its target (a cycle stays a ref)."""
    if isinstance(node, list):
        return [resolve(doc, item, _seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in _seen:
        target = _pointer(doc, ref)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return resolve(doc, {**target, **siblings} if isinstance(target, dict) else target, (*_seen, ref))
    return {key: resolve(doc, value, _seen) for key, value in node.items()}


def _pointer(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _types(spec: dict[str, Any]) -> list[str]:
    kind = spec.get("type")
    if isinstance(kind, list):
        return [str(k) for k in kind]
    return [str(kind)] if kind else []


def type_of(spec: dict[str, Any]) -> str:
    """A short reading of a property's type: ``integer | null``, ``array of string``, ``one of a, b``."""
    if "const" in spec:
        return f"const {json.dumps(spec['const'])}"
    if "enum" in spec:
        return "one of " + ", ".join(json.dumps(v) for v in spec["enum"])
    parts = []
    for kind in _types(spec) or ["any"]:
        if kind == "array" and isinstance(spec.get("items"), dict):
            items = type_of(spec["items"])
            kind = f"array of {'object' if items.startswith('object') else items}"
        elif kind == "string" and spec.get("format"):
            kind = f"string ({spec['format']})"
        parts.append(kind)
    return " | ".join(parts)


_CONSTRAINTS = ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern")


def constraints_of(spec: dict[str, Any]) -> tuple[str, ...]:
    """A property's constraints: ``minimum 1``, ``pattern ...``, and the required fields of its items."""
    found = [f"{name} {spec[name]}" for name in _CONSTRAINTS if name in spec]
    items = spec.get("items")
    if isinstance(items, dict) and items.get("required"):
        found.append("each item requires " + ", ".join(items["required"]))
    return tuple(found)


_PLACEHOLDERS = {
    "uuid": "00000000-0000-4000-8000-000000000000",
    "date-time": "2024-09-08T16:00:00+00:00",
    "date": "2024-09-08",
}


def example_of(schema: Any, name: str = "value") -> Any:
    """A placeholder value valid for ``schema`` (a resolved schema): its example, const or first enum
    value; null where null is allowed; else one of its type built from its bounds and required fields."""
    if not isinstance(schema, dict):
        return None
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("examples"):
        return schema["examples"][0]
    if schema.get("enum"):
        return schema["enum"][0]
    kinds = _types(schema)
    if "null" in kinds:
        return None
    kind = kinds[0] if kinds else ("object" if "properties" in schema else "string")
    if kind == "object":
        props = schema.get("properties") or {}
        return {key: example_of(props.get(key, {}), key) for key in schema.get("required", props)}
    if kind == "array":
        return [example_of(schema.get("items", {}), name)] * max(1, int(schema.get("minItems", 1)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        return int(low) if kind == "integer" else float(low)
    if kind == "boolean":
        return False
    return _PLACEHOLDERS.get(str(schema.get("format")), f"<{name}>")


#: What every trigger message carries besides the request's published fields.
ENVELOPE_FIELDS = frozenset({"tracking_id", "league_id", "team_id", "traceparent", "created_at"})


def _json_types(schema: Any) -> set[str]:
    """The JSON types a (resolved) schema allows, through anyOf/oneOf; empty when it says none."""
    if not isinstance(schema, dict):
        return set()
    found = set(_types(schema))
    for key in ("anyOf", "oneOf"):
        for alternative in schema.get(key) or ():
            found |= _json_types(alternative)
    return found


def check_trigger_queue(queue: TriggerQueue, document: dict[str, Any] | None = None) -> ChannelContract:
    """The channel of ``queue`` in ``document`` (default: the shipped contract), checked against the
    declaration; ContractMismatch names the first disagreement."""
    doc = _parsed() if document is None else document
    where = f"trigger queue {queue.name}"
    channel = next((c for c in channel_contracts(doc) if c.id == queue.channel), None)
    if channel is None:
        raise ContractMismatch(
            f"{where}: the contract has no channel {queue.channel!r} (add it to docs/asyncapi.yaml, "
            "docs/adding-a-trigger-queue.md)"
        )
    if channel.queue != queue.name:
        raise ContractMismatch(f"{where}: channel {queue.channel!r} binds queue {channel.queue!r}")
    message = next((m for m in channel.messages if m.name == queue.message), None)
    if message is None:
        names = ", ".join(m.name for m in channel.messages) or "none"
        raise ContractMismatch(
            f"{where}: channel {queue.channel!r} carries no message {queue.message!r} (it has {names})"
        )
    published = set(queue.request.own_fields()) - REQUEST_ONLY_FIELDS
    payload = {f.name for f in message.fields}
    if payload - ENVELOPE_FIELDS != published:
        raise ContractMismatch(
            f"{where}: message {queue.message!r} carries {sorted(payload - ENVELOPE_FIELDS)} besides the "
            f"envelope, the request publishes {sorted(published)}"
        )
    missing = ENVELOPE_FIELDS - payload
    if missing:
        raise ContractMismatch(f"{where}: message {queue.message!r} lacks {sorted(missing)}")
    model = resolve_model_schema(queue.request.model_json_schema())
    for name in sorted(published):
        allowed = _json_types(model["properties"][name])
        carried = _json_types(message.schema["properties"][name])
        if not carried <= allowed:
            raise ContractMismatch(
                f"{where}: field {name} is {sorted(carried)} in message {queue.message!r}, the request "
                f"model allows {sorted(allowed)}"
            )
    return channel


def resolve_model_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema with its ``$defs`` references inlined."""
    return resolve(schema, {k: v for k, v in schema.items() if k != "$defs"})
