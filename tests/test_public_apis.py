"""kickoff uses its dependencies' public APIs: pika, dramatiq, peewee/playhouse and urllib3 internals
appear only in actors.dramatiq_compat, and there only the ones it declares (at most three).

An AST walk over kickoff's own modules (not tests, not benchmarks). A private name is one with a
single leading underscore. The rules, simple on purpose:

* no ``from <lib>... import _x`` and no ``<lib module>._x`` on a name bound by an import of a lib;
* none of the internals kickoff used to rely on (``KNOWN_INTERNALS``), on anything but ``self``/``cls``,
  nor named in a ``getattr``/``hasattr``/``setattr``;
* no ``super()._x``: a library's private hook overridden and called;
* in a class whose base comes from a lib (directly or through the compat module), no ``self._x``
  the class itself never defines or assigns: an inherited private attribute.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from actors import dramatiq_compat
from tests.project import ROOT, product_modules

LIBS = ("pika", "dramatiq", "peewee", "playhouse", "urllib3")
COMPAT = "actors/dramatiq_compat.py"
#: The internals the compat module may use (one per entry of its UPSTREAM; the storage layout is no name).
ALLOWED_IN_COMPAT = {"_build_queue_arguments", "_tag"}
KNOWN_INTERNALS = {
    # pika
    "_impl", "_flush_output", "_adapter_call_later", "_adapter_remove_timeout", "_output_marshaled_frames",
    "_body_max_length", "_transport", "_tx_buffers", "_sock",
    # dramatiq
    "_RabbitmqConsumer", "_RabbitmqMessage", "_RedisConsumer", "_message", "_tag", "_should_do_maintenance",
    "_max_unpack_size", "_scripts", "_build_queue_arguments", "_dispatch",
    # peewee / playhouse
    "_PooledPostgresqlDatabase", "_state", "_pool_lock", "_in_use", "_connections", "_max_connections",
    "_close_raw", "_wait_timeout", "_stale_timeout",
    # urllib3 / http.client
    "_fp", "_original_response",
}  # fmt: skip


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_lib(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in LIBS


def _own_names(cls: ast.ClassDef) -> set[str]:
    """Attributes a class defines itself: methods, class attributes, ``self.x = ...`` anywhere in it."""
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return names


def violations(path: Path) -> list[str]:
    """Each use of a dependency's internal in one module, as ``file:line: what``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(ROOT).as_posix()
    found: list[tuple[int, str, str]] = []  # (line, name, what)
    lib_names: set[str] = set()  # names bound to lib modules or to objects imported from libs
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_lib(alias.name):
                    lib_names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            from_lib = _is_lib(node.module)
            from_compat = node.module == "actors.dramatiq_compat" or (
                node.module == "actors" and any(a.name == "dramatiq_compat" for a in node.names)
            )
            for alias in node.names:
                if from_lib and _private(alias.name):
                    found.append((node.lineno, alias.name, f"from {node.module} import {alias.name}"))
                if from_lib or from_compat:
                    lib_names.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in KNOWN_INTERNALS
        ):
            found.append((node.lineno, node.args[1].value, f'{node.func.id}(…, "{node.args[1].value}")'))
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        value = node.value
        on_self = isinstance(value, ast.Name) and value.id in ("self", "cls")
        if isinstance(value, ast.Name) and value.id in lib_names:
            found.append((node.lineno, node.attr, f"{value.id}.{node.attr}"))
        elif node.attr in KNOWN_INTERNALS and not on_self:
            found.append((node.lineno, node.attr, f"….{node.attr}"))
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
            found.append((node.lineno, node.attr, f"super().{node.attr}"))
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    for cls in classes.values():
        bases = {
            b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
            for b in cls.bases
        }
        if not bases & lib_names:
            continue
        own = _own_names(cls).union(*(_own_names(classes[b]) for b in bases if b in classes))
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and _private(node.attr)
                and node.attr not in own
            ):
                found.append((node.lineno, node.attr, f"self.{node.attr} inherited from a library class"))
    allowed = ALLOWED_IN_COMPAT if rel == COMPAT else set()
    return [f"{rel}:{line}: {what}" for line, name, what in sorted(found) if name not in allowed]


def test_no_module_uses_a_dependencys_internals_outside_the_compat_module():
    found = [v for path in product_modules() for v in violations(path)]
    assert found == [], "\n".join(found)


def test_at_most_three_internals_remain_each_with_its_upstream_issue():
    assert len(dramatiq_compat.UPSTREAM) <= 3
    assert set(dramatiq_compat.UPSTREAM) >= ALLOWED_IN_COMPAT


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("from playhouse.pool import _PooledPostgresqlDatabase\n", "from playhouse.pool import _Pooled"),
        ("import pika\ndef f(c):\n    return c._impl\n", "._impl"),
        ("def f(resp):\n    return resp.raw._fp.fp\n", "._fp"),
        ("def f(c):\n    return getattr(c, '_tx_buffers', None)\n", 'getattr(…, "_tx_buffers")'),
        ("from dramatiq.brokers import redis\nx = redis._scripts\n", "redis._scripts"),
        ("class A(B):\n    def f(self):\n        return super()._connect()\n", "super()._connect"),
        (
            "from playhouse.pool import PooledDatabase\nclass P(PooledDatabase):\n"
            "    def n(self):\n        return len(self._in_use)\n",
            "self._in_use inherited",
        ),
    ],
)
def test_the_walk_finds_each_kind_of_use(tmp_path, monkeypatch, source, what):
    module = ROOT / "publisher" / "_walk_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source if self == module else "")
    found = violations(module)
    assert found and what in found[0], found


def test_a_class_may_use_the_private_attributes_it_defines_itself(monkeypatch):
    source = (
        "from pika.adapters.select_connection import IOLoop\nclass L(IOLoop):\n"
        "    def __init__(self):\n        self._seen = set()\n"
        "    def add(self, fd):\n        self._seen.add(fd)\n"
    )
    module = ROOT / "publisher" / "_walk_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source if self == module else "")
    assert violations(module) == []
