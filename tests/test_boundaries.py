"""The data boundary: only stores talk to the database driver; nothing above a store catches a driver error.

A store is a module of ``models/``, a module named ``store.py`` or a module under a ``sql/``
package (``publisher/sql``). Walking the AST of every project module, this fails on

- (a) an ``import peewee|psycopg2|playhouse`` outside the stores;
- (b) an ``except`` naming a peewee, psycopg2, redis or pika exception (``Model.DoesNotExist``
  included) outside the stores and the transport modules (pika: ``TRANSPORTS``);
- (c) SQL text outside the stores: an ``execute_sql(...)`` call, an ``.execute(...)`` whose first
  argument is a string, a ``.cursor(...)`` call;
- (d) a peewee query outside the stores: a query method (``select``, ``update``, ``create``, ...)
  called on a peewee model (or a name bound to one), or a row's own ``save()``.

Each failure names the module, the line and the rule. ``NOT_YET_MOVED`` lists the modules that
still break a rule today, with how many times: the list only shrinks (a module may break a rule
fewer times than listed, never more, and a module that breaks none must leave the list).
"""

from __future__ import annotations

import ast
import importlib
from collections import Counter

import peewee
import pytest

from tests.project import ROOT, product_modules

DRIVERS = frozenset({"peewee", "psycopg2", "playhouse"})
#: Libraries whose exceptions only their store or transport module may catch.
DRIVER_EXCEPTIONS = DRIVERS | {"redis", "pika"}
#: The modules that may catch a library's exceptions besides the stores: pika's transport.
TRANSPORTS: dict[str, frozenset[str]] = {
    "pika": frozenset({"publisher/amqp_link.py"}),
}
#: The methods that start a peewee query on a model class.
QUERY_METHODS = frozenset(
    {
        "select",
        "update",
        "insert",
        "insert_many",
        "insert_from",
        "replace",
        "replace_many",
        "delete",
        "delete_by_id",
        "get",
        "get_or_none",
        "get_by_id",
        "get_or_create",
        "create",
        "bulk_create",
        "bulk_update",
        "raw",
        "set_by_id",
    }
)

#: A model instance's own writes (``run.save()``): a peewee query too.
ROW_WRITES = frozenset({"save", "delete_instance"})

#: Modules that still break a rule, and how many times, per rule (issue 23: not moved yet). This
#: list only shrinks: move a module's queries behind named functions of its package's store
#: (``models/<table>.py``, ``<package>/store.py`` or ``<package>/sql/``), then lower or drop its
#: entry; a new breach anywhere fails. Empty: pika's errors are translated once, in the AMQP
#: transport (publisher/amqp_link.py), and every query runs in a store.
NOT_YET_MOVED: dict[str, Counter[str]] = {}


def _is_store(rel: str) -> bool:
    parts = rel.split("/")
    return parts[0] == "models" or parts[-1] == "store.py" or "sql" in parts[:-1]


def _model_names() -> frozenset[str]:
    """The names of the peewee model classes ``models/`` defines."""
    names = set()
    for path in (ROOT / "models").glob("*.py"):
        module = importlib.import_module(f"models.{path.stem}")
        for name, value in vars(module).items():
            defined_here = getattr(value, "__module__", None) == module.__name__
            if isinstance(value, type) and issubclass(value, peewee.Model) and defined_here:
                names.add(name)
    return frozenset(names)


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _library_aliases(tree: ast.Module) -> dict[str, str]:
    """Names bound in ``tree`` to a library of DRIVER_EXCEPTIONS (or to a name imported from one)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top in DRIVER_EXCEPTIONS:
                    aliases[(a.asname or a.name).split(".")[0]] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top in DRIVER_EXCEPTIONS:
                for a in node.names:
                    aliases[a.asname or a.name] = top
    return aliases


def _model_aliases(tree: ast.Module, models: frozenset[str]) -> frozenset[str]:
    """Names bound in ``tree`` to a model class (``R = MatchListenerRecord``)."""
    return frozenset(
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in models
        for target in node.targets
        if isinstance(target, ast.Name)
    )


def _caught(handler: ast.ExceptHandler) -> list[ast.expr]:
    if handler.type is None:
        return []
    return list(handler.type.elts) if isinstance(handler.type, ast.Tuple) else [handler.type]


def _model_called(node: ast.expr, models: frozenset[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in models


def _is_sql_text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def breaches(source: str, rel: str, models: frozenset[str]) -> list[tuple[int, str, str]]:
    """(line, rule, what) for every breach of the boundary in module ``rel`` (path from the root)."""
    if _is_store(rel):
        return []
    tree = ast.parse(source, filename=rel)
    aliases = _library_aliases(tree)
    models = models | _model_aliases(tree, models)
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in DRIVERS:
                    found.append((node.lineno, "a", f"import {a.name}"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in DRIVERS:
                found.append((node.lineno, "a", f"from {node.module} import ..."))
        elif isinstance(node, ast.ExceptHandler):
            for caught in _caught(node):
                library = aliases.get(_root(caught) or "")
                if isinstance(caught, ast.Attribute) and caught.attr == "DoesNotExist":
                    library = "peewee"
                if library and rel not in TRANSPORTS.get(library, ()):
                    found.append((node.lineno, "b", f"except {ast.unparse(caught)} ({library})"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method == "execute_sql":
                found.append((node.lineno, "c", "execute_sql(...)"))
            elif method == "execute" and node.args and _is_sql_text(node.args[0]):
                found.append((node.lineno, "c", ".execute(<SQL string>)"))
            elif method == "cursor":
                found.append((node.lineno, "c", ".cursor()"))
            elif method in ROW_WRITES and not node.args and not node.keywords:
                found.append((node.lineno, "d", f"{ast.unparse(node.func.value)}.{method}()"))
            elif method in QUERY_METHODS and _model_called(node.func.value, models):
                found.append((node.lineno, "d", f"{ast.unparse(node.func.value)}.{method}(...)"))
    return found


@pytest.fixture(scope="module")
def all_breaches() -> dict[str, list[tuple[int, str, str]]]:
    models = _model_names()
    out = {}
    for path in product_modules():
        rel = path.relative_to(ROOT).as_posix()
        found = breaches(path.read_text(), rel, models)
        if found:
            out[rel] = found
    return out


def test_only_stores_talk_to_the_database_and_catch_driver_errors(
    all_breaches: dict[str, list[tuple[int, str, str]]],
) -> None:
    problems = []
    for rel, found in all_breaches.items():
        counts = Counter(rule for _, rule, _ in found)
        allowed = NOT_YET_MOVED.get(rel, Counter())
        for rule, count in sorted(counts.items()):
            if count > allowed[rule]:
                lines = [f"    {rel}:{line}: rule ({r}) {what}" for line, r, what in found if r == rule]
                head = f"{rel}: rule ({rule}) broken {count} times (allowed {allowed[rule]}):"
                problems.append("\n".join([head, *lines]))
    assert not problems, (
        "outside the stores (models/, store.py, sql/): (a) no driver import, (b) no driver exception caught,"
        " (c) no SQL text, (d) no peewee query:\n" + "\n".join(problems)
    )


def test_the_not_yet_moved_list_only_shrinks(all_breaches: dict[str, list[tuple[int, str, str]]]) -> None:
    stale = []
    for rel, allowed in NOT_YET_MOVED.items():
        counts = Counter(rule for _, rule, _ in all_breaches.get(rel, []))
        for rule, count in allowed.items():
            if counts[rule] < count:
                stale.append(f"{rel}: rule ({rule}) now {counts[rule]} times, listed {count}: lower it")
    assert not stale, "NOT_YET_MOVED lists more than is left:\n" + "\n".join(stale)


def test_the_walk_finds_each_kind_of_breach() -> None:
    """The rules fire on a module that breaks each of them (so a clean walk means something)."""
    source = (
        "import peewee\n"
        "from models.match import Match\n"
        "try:\n"
        "    database.execute_sql('SELECT 1')\n"
        "    cur = conn.cursor()\n"
        "    cur.execute(f'SELECT {x}')\n"
        "    Match.select()\n"
        "    R = Match\n"
        "    R.update(x=1)\n"
        "    run.save()\n"
        "except peewee.IntegrityError:\n"
        "    pass\n"
        "except Match.DoesNotExist:\n"
        "    pass\n"
    )
    found = breaches(source, "cli/probe.py", frozenset({"Match"}))
    assert sorted(r for _, r, _ in found) == ["a", "b", "b", "c", "c", "c", "d", "d", "d"]
    assert (1, "a", "import peewee") in found
    assert breaches(source, "models/probe.py", frozenset({"Match"})) == []
    assert breaches(source, "publisher/sql/probe.py", frozenset({"Match"})) == []
    assert breaches(source, "api/store.py", frozenset({"Match"})) == []


def test_pika_is_caught_only_in_its_transport() -> None:
    source = "import pika\ntry:\n    pass\nexcept pika.exceptions.AMQPError:\n    pass\n"
    assert breaches(source, "publisher/amqp_link.py", frozenset()) == []
    assert [r for _, r, _ in breaches(source, "runs/probe.py", frozenset())] == ["b"]


# -- one error vocabulary: every KickoffError class declares one kind ---------------------------


def _error_classes() -> list[type]:
    """Every KickoffError class of the product: the tree's module, and any other the CLI and the API load."""
    from config.errors import KickoffError

    for module in ("config.errors", "cli.main", "api.app", "actors"):
        importlib.import_module(module)
    found: list[type] = []
    todo = list(KickoffError.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls not in found and cls.__module__.split(".")[0] != "tests":
            found.append(cls)
            todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: (c.__module__, c.__name__))


def test_every_error_class_declares_one_kind_and_its_status_exit_and_notice_derive_from_it() -> None:
    from api.errors import NOTICE_OF, STATUS_OF, status_of
    from cli.answers import EXIT_OF, exit_code_of
    from config.errors import ErrorKind, KickoffError

    assert "kind" not in vars(KickoffError), "the base declares no kind: each branch does"
    assert set(STATUS_OF) == set(EXIT_OF) == set(NOTICE_OF) == set(ErrorKind)  # one table each
    classes = _error_classes()
    assert len(classes) > 60
    for cls in classes:
        kind = getattr(cls, "kind", None)
        assert isinstance(kind, ErrorKind), f"{cls.__module__}.{cls.__name__} declares no kind"
        exc = cls.__new__(cls)  # no __init__: the class alone decides
        assert status_of(exc) == STATUS_OF[kind] and exit_code_of(exc) == EXIT_OF[kind], cls.__name__


def test_an_error_class_without_a_kind_is_caught() -> None:
    from config.errors import KickoffError, kind_of

    class Kindless(KickoffError):
        """A class that forgot its kind."""

    assert getattr(Kindless, "kind", None) is None
    assert kind_of(Kindless()) == "failed"  # answered as a failure, but the walk above refuses it


@pytest.mark.parametrize(
    ("name", "status", "exit_code"),
    [
        ("TradeError", 409, 4),  # was 409 over HTTP and exit 1: a conflict in both now
        ("BulkInvalid", 422, 3),  # was 422 and a usage error (exit 2): invalid in both now
        ("UnknownJob", 422, 3),  # was 422 and exit 2 (a NotFound): invalid in both now
        ("MatchNotFound", 404, 2),
        ("DatabaseUnavailable", 503, 5),
        ("StartAttemptsExhausted", 409, 4),
        ("Forbidden", 403, 1),
    ],
)
def test_the_mappings_that_disagreed_now_agree(name: str, status: int, exit_code: int) -> None:
    import config.errors as errors
    from api.errors import status_of
    from cli.answers import exit_code_of

    exc = getattr(errors, name).__new__(getattr(errors, name))
    assert (status_of(exc), exit_code_of(exc)) == (status, exit_code)
