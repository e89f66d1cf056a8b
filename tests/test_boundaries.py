"""The data boundary: only stores talk to the database driver; nothing above a store catches a driver error.

A store is a module of ``models/``, a module named ``store.py`` or a module under a ``sql/``
package (``publisher/sql``). Walking the AST of every project module, this fails on

- (a) an ``import peewee|psycopg2|playhouse`` outside the stores;
- (b) an ``except`` naming a peewee, psycopg2, redis or pika exception (``Model.DoesNotExist``
  included) outside the stores and the transport modules (pika: ``TRANSPORTS``);
- (c) SQL text outside the stores: an ``execute_sql(...)`` call, an ``.execute(...)`` whose first
  argument is a string, a ``.cursor(...)`` call;
- (d) a peewee query outside the stores: a query method (``select``, ``update``, ``create``, ...)
  called on a peewee model (or a name bound to one), or a row's own ``save()``;
- (e) statement choice outside the stores: a named statement of a ``sql/`` module (a SQL string
  constant such as ``action_sql.SELECT_BY_KEY``) picked by a module above it, instead of calling
  the store function that owns it;
- (f) positional row access outside the stores: ``row[N]``, ``a, b = row``, ``for a, b in rows``
  or ``Named(*row)`` on what a statement runner returns (``fetch_one``, ``fetch_all``,
  ``fetchone``, ``fetchall``, a store function named ``*_row`` / ``*_rows``, imported by name or
  called on its module: ``action_sql.parent_action_row(...)``),
  instead of a dataclass or named row the store builds.

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
#: Rules (e) and (f) came later (issue 38 structure 2); empty too: no module above the stores picks a
#: statement or reads a row by position.
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


#: Statement runners: what they return is a row (tuple) or a list of rows.
ONE_ROW = frozenset({"fetch_one", "fetchone"})
MANY_ROWS = frozenset({"fetch_all", "fetchall", "fetchmany"})
_SQL_START = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")


def _store_imports(tree: ast.Module) -> tuple[dict[str, str], dict[str, str]]:
    """(alias -> store module, name -> store module) of ``tree``'s imports from store modules."""
    modules: dict[str, str] = {}
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if _is_store(full.replace(".", "/") + ".py") and _is_module(full):
                    modules[a.asname or a.name] = full
                elif _is_store(node.module.replace(".", "/") + ".py"):
                    names[a.asname or a.name] = node.module
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and _is_store(a.name.replace(".", "/") + ".py"):
                    modules[a.asname] = a.name
    return modules, names


def _is_module(dotted: str) -> bool:
    try:
        importlib.import_module(dotted)
    except ImportError:
        return False
    return True


def _is_statement(module: str, name: str) -> bool:
    """Whether ``module.name`` is a SQL statement constant (an upper-case string starting like SQL)."""
    if not name.isupper() or "sql" not in module.split("."):
        return False
    value = getattr(importlib.import_module(module), name, None)
    return isinstance(value, str) and value.lstrip().upper().startswith(_SQL_START)


def _fetcher(node: ast.expr, store_names: dict[str, str], store_modules: dict[str, str]) -> str | None:
    """ "one" or "many" when ``node`` is a call of a statement runner (or the runner handed to
    ``run_in_threadpool``); None otherwise. A store function counts imported by name or called on its
    module (``action_sql.parent_action_row(...)``)."""
    if isinstance(node, ast.Await):
        node = node.value
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if _called_name(func) == "run_in_threadpool" and node.args:
        func = node.args[0]
    name = _called_name(func) or ""
    on_store = isinstance(func, ast.Attribute) and _root(func.value) in store_modules
    in_store = name in store_names or on_store
    if name in ONE_ROW or (in_store and name.endswith("_row")):
        return "one"
    if name in MANY_ROWS or (in_store and name.endswith("_rows")):
        return "many"
    return None


def _called_name(func: ast.expr) -> str | None:
    """The name ``func`` calls: ``f`` of ``f(...)`` and of ``module.f(...)``."""
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _int_index(node: ast.Subscript) -> bool:
    index = node.slice
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand
    return isinstance(index, ast.Constant) and type(index.value) is int


def _row_breaches(
    tree: ast.Module, store_names: dict[str, str], store_modules: dict[str, str]
) -> list[tuple[int, str, str]]:
    """Rule (f): positional access to rows a statement runner returned (one pass per scope is enough:
    the names are those bound from a runner anywhere in the module)."""

    def fetcher(node: ast.expr) -> str | None:
        return _fetcher(node, store_names, store_modules)

    one: set[str] = set()
    many: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            kind = fetcher(node.value)
            if kind == "one":
                one.add(node.targets[0].id)
            elif kind == "many":
                many.add(node.targets[0].id)
    for node in ast.walk(tree):  # a loop over many rows binds one row
        for target, source in _loops(node):
            if isinstance(target, ast.Name) and (
                fetcher(source) == "many" or (isinstance(source, ast.Name) and source.id in many)
            ):
                one.add(target.id)

    def row(node: ast.expr) -> bool:
        return fetcher(node) == "one" or (isinstance(node, ast.Name) and node.id in one)

    def rows(node: ast.expr) -> bool:
        return fetcher(node) == "many" or (isinstance(node, ast.Name) and node.id in many)

    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _int_index(node) and row(node.value):
            found.append((node.lineno, "f", ast.unparse(node)))
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and row(node.value):
            found.append((node.lineno, "f", f"{ast.unparse(node.targets[0])} = {ast.unparse(node.value)}"))
        elif isinstance(node, ast.Starred) and row(node.value):
            found.append((node.lineno, "f", ast.unparse(node)))
        for target, source in _loops(node):
            if isinstance(target, ast.Tuple) and rows(source):
                found.append((node.lineno, "f", f"for {ast.unparse(target)} in {ast.unparse(source)}"))
    return found


def _loops(node: ast.AST) -> list[tuple[ast.expr, ast.expr]]:
    """(target, iterable) of a for statement or of each generator of a comprehension."""
    if isinstance(node, ast.For | ast.AsyncFor):
        return [(node.target, node.iter)]
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        return [(g.target, g.iter) for g in node.generators]
    return []


def breaches(source: str, rel: str, models: frozenset[str]) -> list[tuple[int, str, str]]:
    """(line, rule, what) for every breach of the boundary in module ``rel`` (path from the root)."""
    if _is_store(rel):
        return []
    tree = ast.parse(source, filename=rel)
    aliases = _library_aliases(tree)
    models = models | _model_aliases(tree, models)
    store_modules, store_names = _store_imports(tree)
    found: list[tuple[int, str, str]] = _row_breaches(tree, store_names, store_modules)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = store_modules.get(node.value.id)
            if module and _is_statement(module, node.attr):
                found.append((node.lineno, "e", ast.unparse(node)))
        elif (
            isinstance(node, ast.Name)
            and node.id in store_names
            and _is_statement(store_names[node.id], node.id)
        ):
            found.append((node.lineno, "e", node.id))
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
        " (c) no SQL text, (d) no peewee query, (e) no statement choice, (f) no positional row access:\n"
        + "\n".join(problems)
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
    rows_source = (
        "from publisher.sql import actions as action_sql, fetch_all, fetch_one\n"
        "from publisher.sql.outbox import COUNT_DEAD\n"
        "from models.listener_record import recorded_match_rows\n"
        "row = fetch_one(action_sql.SELECT_VIEW, (1,))\n"
        "status = row[1]\n"
        "a, b = fetch_one(COUNT_DEAD)\n"
        "for x, y in fetch_all('q'):\n"
        "    pass\n"
        "named = [Named(*r) for r in recorded_match_rows(5)]\n"
        "kind, league = action_sql.parent_action_row(x, timeout_ms=5)\n"  # a store function on its module
        "ok = fetch_all('q')[0]\n"  # the first of many rows: a list index, not a column
    )
    row_found = breaches(rows_source, "cli/probe.py", frozenset())
    assert sorted(r for _, r, _ in row_found) == ["e", "e", "f", "f", "f", "f", "f"], row_found
    assert breaches(rows_source, "publisher/sql/probe.py", frozenset()) == []
    assert (1, "a", "import peewee") in found
    assert breaches(source, "models/probe.py", frozenset({"Match"})) == []
    assert breaches(source, "publisher/sql/probe.py", frozenset({"Match"})) == []
    assert breaches(source, "api/store.py", frozenset({"Match"})) == []


def test_pika_is_caught_only_in_its_transport() -> None:
    source = "import pika\ntry:\n    pass\nexcept pika.exceptions.AMQPError:\n    pass\n"
    assert breaches(source, "publisher/amqp_link.py", frozenset()) == []
    assert [r for _, r, _ in breaches(source, "runs/probe.py", frozenset())] == ["b"]


# -- Redis: one package talks to it, one function translates its errors ------------------------

#: The product modules that may import the Redis driver: the coordination package (every key of
#: REDIS_URL, one module per concern) and the broker Redis's presence store.
REDIS_IMPORTERS = ("models/coordination/", "models/presence.py")
#: The one module that catches a Redis exception: ``redis_errors``, the translation every Redis
#: call of the product runs inside (the coordination concerns, presence and the broker's sends).
REDIS_TRANSLATION = "models/coordination/_redis.py"


def redis_breaches(source: str, rel: str) -> list[tuple[int, str]]:
    """(line, what) for a Redis import outside ``REDIS_IMPORTERS`` and for an ``except`` naming a
    Redis exception outside ``REDIS_TRANSLATION``."""
    tree = ast.parse(source, filename=rel)
    aliases = {name for name, library in _library_aliases(tree).items() if library == "redis"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and not rel.startswith(REDIS_IMPORTERS):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                names = []
            found += [(node.lineno, f"import {n}") for n in names if n.split(".")[0] == "redis"]
        elif isinstance(node, ast.ExceptHandler) and rel != REDIS_TRANSLATION:
            found += [
                (node.lineno, f"except {ast.unparse(caught)}")
                for caught in _caught(node)
                if _root(caught) in aliases
            ]
    return found


def test_only_the_coordination_package_imports_redis_and_only_its_translation_catches_it() -> None:
    problems = [
        f"{path.relative_to(ROOT).as_posix()}:{line}: {what}"
        for path in product_modules()
        for line, what in redis_breaches(path.read_text(), path.relative_to(ROOT).as_posix())
    ]
    assert not problems, (
        f"the Redis driver is imported only in {', '.join(REDIS_IMPORTERS)} and its errors are caught only"
        f" in {REDIS_TRANSLATION} (redis_errors):\n" + "\n".join(problems)
    )


def test_the_redis_rule_fires_on_an_import_and_a_catch_elsewhere() -> None:
    source = (
        "import redis\nfrom redis.exceptions import LockError\ntry:\n    pass\nexcept LockError:\n    pass\n"
    )
    assert [what for _, what in redis_breaches(source, "lifecycle/probe.py")] == [
        "import redis",
        "import redis.exceptions",
        "except LockError",
    ]
    in_a_concern = redis_breaches(source, "models/coordination/locks.py")
    assert [what for _, what in in_a_concern] == ["except LockError"]
    assert redis_breaches(source, REDIS_TRANSLATION) == []


# -- one error vocabulary: every KickoffError class declares one kind ---------------------------


#: The classes config/errors.py may define: the base and its vocabulary, configuration and time, the
#: services and the drivers' refusals, the refusals every layer raises, and the text rules of
#: config.text_rule and config.feed_text (ConsoleError is the base of ReasonRequired, which
#: config.text_rule raises). A domain error lives in an ``errors.py`` beside its package.
CONFIG_ERRORS = frozenset(
    {
        "ErrorKind",
        "KickoffError",
        "ConfigurationError",
        "InvalidTimeError",
        "NaiveDatetimeError",
        "ServiceUnavailable",
        "DatabaseUnavailable",
        "RedisUnavailable",
        "BrokerUnavailable",
        "DatabaseNotMigrated",
        "MigrationError",
        "DatabaseRefused",
        "ConstraintViolation",
        "BarrierError",
        "LockNotOwned",
        "RedisCommandRefused",
        "NotFound",
        "AlreadyExists",
        "Forbidden",
        "InvalidQuery",
        "InvalidText",
        "ConsoleError",
        "ReasonRequired",
        "MalformedFeedEntry",
    }
)


def _errors_modules() -> list[str]:
    """The dotted name of every product module named ``errors.py`` (``config.errors``, ``runs.errors``)."""
    return [
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in product_modules()
        if path.name == "errors.py"
    ]


def _error_classes() -> list[type]:
    """Every KickoffError class of the product: every package's errors module, and any other the CLI and
    the API load."""
    from config.errors import KickoffError

    for module in (*_errors_modules(), "cli.main", "api.app", "actors"):
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


def test_the_walk_finds_the_classes_of_every_package_s_errors_module() -> None:
    modules = set(_errors_modules())
    assert {"config.errors", "models.errors", "lifecycle.errors", "runs.errors", "api.errors"} <= modules
    assert {cls.__module__ for cls in _error_classes()} >= modules  # each errors module's classes are walked


def _classes_defined(path: str) -> set[str]:
    """The names of the top-level classes of the module at ``path`` (relative to the root)."""
    tree = ast.parse((ROOT / path).read_text(), filename=path)
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def test_config_errors_defines_only_the_base_and_the_cross_cutting_errors() -> None:
    defined = _classes_defined("config/errors.py")
    assert defined - CONFIG_ERRORS == set(), (
        "config/errors.py keeps the base and the cross-cutting errors (CONFIG_ERRORS): move "
        f"{sorted(defined - CONFIG_ERRORS)} to the errors.py beside the package that raises it"
    )
    assert CONFIG_ERRORS - defined == set(), "CONFIG_ERRORS names a class config/errors.py no longer defines"


def test_every_public_error_class_lives_in_an_errors_module() -> None:
    elsewhere = [
        f"{cls.__module__}.{cls.__name__}"
        for cls in _error_classes()
        if cls.__module__.rsplit(".", 1)[-1] != "errors" and not cls.__name__.startswith("_")
    ]
    assert elsewhere == [], "define an error class in the errors.py beside its package (one home per concept)"


def _bare_base_raises(source: str, rel: str) -> list[str]:
    """``rel:line`` of every ``raise KickoffError(...)`` in ``source``: the base has no kind."""
    found = []
    for node in ast.walk(ast.parse(source, filename=rel)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            func = node.exc.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "KickoffError":
                found.append(f"{rel}:{node.lineno}")
    return found


def test_product_code_raises_a_class_with_a_kind_never_the_bare_base() -> None:
    found = [
        hit
        for path in product_modules()
        for hit in _bare_base_raises(path.read_text(), path.relative_to(ROOT).as_posix())
    ]
    assert found == [], "raise the class whose kind says what it is (an errors.py), not KickoffError"
    assert _bare_base_raises("raise KickoffError('x')\nraise errors.KickoffError('y')", "m.py") == [
        "m.py:1",
        "m.py:2",
    ]


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
    from api.errors import status_of
    from cli.answers import exit_code_of

    (cls,) = [c for c in _error_classes() if c.__name__ == name]
    exc = cls.__new__(cls)
    assert (status_of(exc), exit_code_of(exc)) == (status, exit_code)


# -- one audit convention: the library writes an act's entry (``audit=``), never a CLI command or a
# route itself ----

#: CLI and route modules that still write entries themselves (issue 38 structure 3), and how many
#: times. This list only shrinks: hand the command's ``obj.audit()`` (a route's ``audit_of(request)``)
#: to the library function as ``audit=``. Empty: every command and route hands its context over (a new
#: entry written by a command or a route itself fails).
CLI_AUDITS_NOT_YET_MOVED: Counter[str] = Counter()

#: The surfaces that hand their audit context over: the CLI, the API's routes and the console's.
SURFACES = ("cli", "api/routes", "api/console/routes")


def _entries_written(source: str) -> int:
    """Calls of ``<something>.record(...)`` on an audit context (``obj.audit().record``, ``audit.record``)
    or of ``record_audit(...)`` in ``source``."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        direct = isinstance(func, ast.Name) and func.id == "record_audit"
        on_context = (
            isinstance(func, ast.Attribute) and func.attr == "record" and "audit" in ast.unparse(func.value)
        )
        count += direct or on_context
    return count


def test_the_cli_and_the_routes_hand_their_audit_context_to_the_library_instead_of_writing_entries() -> None:
    modules = {
        path.relative_to(ROOT).as_posix(): path
        for surface in SURFACES
        for path in sorted((ROOT / surface).rglob("*.py"))
    }
    assert {"cli/trades.py", "api/routes/trades.py", "api/routes/triggers.py"} <= set(modules)
    found = Counter({rel: n for rel, path in modules.items() if (n := _entries_written(path.read_text()))})
    assert found == CLI_AUDITS_NOT_YET_MOVED, (
        "pass audit=obj.audit() (a route: audit=audit_of(request)) to the library function that acts "
        "(lower or drop an entry of CLI_AUDITS_NOT_YET_MOVED once a module writes fewer entries itself): "
        f"{dict(found)}"
    )
    assert _entries_written("obj.audit().record('a', 'b', None)\nrecord_audit(actor=x)\nlog.record(1)\n") == 2
    assert _entries_written("audit_of(request).record('trade.approve', 'trade', key)\n") == 1
