"""The layer rules of ``docs/architecture.md``, read from the package's import graph.

The graph is read with ``ast`` from the source files (nothing is imported or executed):
an edge ``a -> b`` for every ``import`` / ``from ... import`` in module ``a`` naming
module ``b`` of the package (``from pkg import name`` names the submodule ``pkg.name``
when there is one, else ``pkg`` itself; the parent packages' ``__init__`` a real import
also runs are not edges). Each import is one of three kinds: *module* (run when the
module is imported, also inside ``try``/``if`` at module level and in class bodies),
*function* (inside a ``def``: run when it is called) and *type_checking* (under
``if TYPE_CHECKING:``: never run).

The rules, each a test below:

- no cycle among module-level imports; function-level and ``TYPE_CHECKING`` imports of
  the package only where ``DEFERRED_IMPORTS`` names them, each with its reason;
- the inner layers (``core/``, ``plans/``, ``hot/``, ``durable/``) import no server
  client library (``redis``, ``pymongo``, ``bson``, ``motor``) and not ``io/``, at any
  kind: the plans say what to do, ``io/drivers.py`` does it;
- ``hot/scripts.py`` holds no Lua text (the scripts are files, ``hot/lua/*.lua``);
- every import points down ``LAYERS`` (a unit imports units of lower rows only, or
  itself), and ``docs/architecture.md`` shows the drawing ``layer_drawing()`` makes of
  ``LAYERS``: ``python tests/unit/test_layers.py`` prints it;
- docs/architecture.md names every public plan (a function returning ``Plan[...]``)
  where it lives: ``python tests/unit/test_layers.py --plans`` prints the table.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "langgraph_durable"
PACKAGE_DIR = ROOT / PACKAGE
ARCHITECTURE_DOC = ROOT / "docs" / "architecture.md"

LAYERS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # (row, units, what the row is), bottom first. A *unit* is a sub-package (its
    # folder) or a top-level module of langgraph_durable; "__init__" is the package's
    # own __init__.py (its public names). A unit may import itself and the units of
    # lower rows, never a unit of its own row or of a row above.
    ("base", ("errors", "config"),
     "the error hierarchy, DurableConfig"),
    ("foundations", ("settings", "core", "compaction"),
     "environment settings; operation types, schema, records, items; compaction"),
    ("stores", ("serde", "hot", "durable"),
     "serializers and blob stores; Redis keys and scripts; MongoDB documents"),
    ("plans", ("plans",), "every operation once, as a sans-I/O generator"),
    ("io", ("io", "metrics"), "the drivers and clients (the only server I/O); metrics"),
    ("outbox", ("outbox",), "the stream, the flusher's loop and rounds, heartbeats, worker"),
    ("runtime", ("runtime",), "SaverRuntime, set-up, lifecycle, deferred calls"),
    ("admin", ("admin",), "external-object GC, item migration (given a SaverRuntime)"),
    ("memory", ("store",), "DurableStore, LangGraph's long-term memory store"),
    ("saver", ("saver",), "DurableSaver, the LangGraph contract"),
    ("public", ("effects", "shared", "inspection"),
     "once/aonce; SharedSaver; what the tools show"),
    ("journal", ("journal",), "the model-call journal: journaled(), ModelJournalMiddleware"),
    ("package", ("__init__",), "the package's names"),
    ("dashboard", ("dashboard",), "the browser dashboard"),
    ("tools", ("cli", "testing"), "the langgraph-durable command; the pytest plugins"),
)

INNER_UNITS = ("core", "plans", "hot", "durable")
"""The units that hold no I/O: they may not import a server client library or ``io``."""

FORBIDDEN_IN_INNER = ("redis", "pymongo", "bson", "motor", f"{PACKAGE}.io")

DEFERRED_IMPORTS: dict[tuple[str, str], str] = {
    # (importer, imported) -> why the import waits for a call (function-level) or is
    # only read by the type checker (TYPE_CHECKING). "" is the package itself. Anything
    # else of the package is imported at module level. Those marked "redundant" name a
    # module the importer imports at module level already (left to the module's owner).
    ("", "journal.journal_middleware"): "langchain's agent middleware is the agents extra: "
                                "ModelJournalMiddleware is imported on first use",
    ("", "journal"): "journaled loads LangChain's chat-model classes, tracers and "
                     "LangSmith (0.7 s of CPU): imported on first use, so the CLI and "
                     "flusher workers start without them (tests/unit/test_import_cost.py)",
    ("admin.extref_gc", "serde.stores"): "type hint only (BlobStore)",
    ("admin.item_migration", "plans.context"): "type hint only (Context)",
    ("admin.item_migration", "plans.write"):
        "value_typed only when a value is converted; keeps the module light",
    ("plans.migrations", "plans.context"): "type hint only (Context)",
    ("cli", "cli.commands"): "typer and rich are the cli extra: without them main() "
                             "says how to install them instead of failing on import",
    ("cli.commands", ""): "__version__ for --version only",
    ("cli.dashboard", "dashboard.app"): "the dashboard extra (starlette, uvicorn, "
                                        "jinja2) only for the dashboard command",
    ("cli.dashboard", "dashboard.security"): "the same optional extra",
    ("cli.dashboard", "inspection.graph_actions"): "the graphs' actions only for the dashboard "
                                             "command (and after the extra's check)",
    ("cli.operating", "outbox.worker"): "the worker only for `langgraph-durable flusher`",
    ("cli.operating", "plans.history_edits"): "check_prune only for `langgraph-durable prune`",
    ("cli.session", "serde"): "a blob store only when a session builds one",
    ("cli.session", "errors"): "only on the error path (an invalid option's message)",
    ("compaction", "compaction.agent_middleware"):
        "langchain's agent middleware is the agents extra: imported on first use "
        "(module __getattr__) and for the type checker",
    ("dashboard", "dashboard.app"): "starlette only when the app is built",
    ("inspection.tolerant", "serde.external"): "only when a value failed to decode",
    ("serde.codecs", "serde.pandas_codec"): "pandas and pyarrow are optional",
    ("serde.s3_store", "settings"): "settings only when an S3 client is built (with boto3)",
    ("testing", "config"): "drop_namespace only: the servers' module starts servers "
                           "without the package's configuration",
    ("testing", "io.redis_urls"): "the same",
}


@dataclass(frozen=True)
class Import:
    """One import statement's target: ``importer`` and ``imported`` are dotted module
    names (``imported`` may be outside the package), ``kind`` is ``"module"``,
    ``"function"`` or ``"type_checking"``, ``line`` its line in the importer."""

    importer: str
    imported: str
    kind: str
    line: int


def package_modules() -> dict[str, pathlib.Path]:
    """Every module of the package: dotted name -> its source file."""
    mods: dict[str, pathlib.Path] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports_in(module: str, is_package: bool, body: list[ast.stmt], kind: str,
                mods: dict[str, pathlib.Path]) -> Iterator[Import]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _imports_in(module, is_package, node.body, "function", mods)
        elif isinstance(node, ast.If) and _is_type_checking(node):
            yield from _imports_in(module, is_package, node.body, "type_checking", mods)
            yield from _imports_in(module, is_package, node.orelse, kind, mods)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, kind, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = module.split(".") if is_package else module.split(".")[:-1]
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield Import(module, full if full in mods else base, kind, node.lineno)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(node, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.AST):
                    yield from _imports_in(module, is_package, sub, kind, mods)


@functools.cache
def parsed(path: pathlib.Path) -> ast.Module:
    """The syntax tree of one source file, parsed once per test run."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@functools.lru_cache(maxsize=1)
def all_imports() -> tuple[Import, ...]:
    """Every import of every module of the package, in file and line order."""
    mods = package_modules()
    found: list[Import] = []
    for module, path in mods.items():
        tree = parsed(path)
        found.extend(_imports_in(module, path.name == "__init__.py", tree.body, "module",
                                 mods))
    return tuple(found)


def _short(module: str) -> str:
    """``langgraph_durable.plans.read`` -> ``plans.read``; the package itself -> ``""``."""
    return module[len(PACKAGE) + 1:] if module != PACKAGE else ""


def _inside(imported: str) -> bool:
    return imported == PACKAGE or imported.startswith(PACKAGE + ".")


def unit_of(module: str) -> str:
    """The layer unit of a package module: its sub-package or top-level module name,
    ``"__init__"`` for the package itself."""
    short = _short(module)
    return short.split(".")[0] if short else "__init__"


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing
    itself) of ``edges``, each sorted: every import cycle lies in one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def connect(node: str) -> None:  # Tarjan's algorithm; the graph has ~130 nodes
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return sorted(components)


def layer_drawing() -> str:
    """The drawing of ``LAYERS`` that docs/architecture.md shows: top row first, each
    row's units and what the row is."""
    width = max(len("  ".join(units)) for _, units, _ in LAYERS)
    lines = []
    for row, units, what in reversed(LAYERS):
        lines.append(f"{row:<12}{'  '.join(units):<{width}}  {what}")
    return "\n".join(lines)


def public_plans() -> dict[str, list[str]]:
    """Module path (``plans/read.py``) -> its public plans: module-level functions whose
    return annotation is ``Plan[...]`` and whose name has no leading underscore."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = parsed(path)
        names = [node.name for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.returns is not None
                 and ast.unparse(node.returns).startswith("Plan[")
                 and not node.name.startswith("_")]
        if names:
            found[path.relative_to(PACKAGE_DIR).as_posix()] = names
    return found


def plan_table() -> str:
    """The table of docs/architecture.md naming where each plan lives."""
    rows = ["| module | plans |", "| --- | --- |"]
    rows += [f"| `{module}` | {', '.join(f'`{n}`' for n in names)} |"
             for module, names in public_plans().items()]
    return "\n".join(rows)


def test_no_module_level_import_cycles() -> None:
    edges: dict[str, set[str]] = {}
    for imp in all_imports():
        if imp.kind == "module" and _inside(imp.imported):
            edges.setdefault(imp.importer, set()).add(imp.imported)
    cycles = import_cycles(edges)
    assert not cycles, "modules importing each other:\n" + "\n".join(map(" ".join, cycles))


def test_the_package_is_imported_in_functions_or_for_the_type_checker_only_where_named():
    deferred = {(_short(imp.importer), _short(imp.imported)) for imp in all_imports()
                if imp.kind != "module" and _inside(imp.imported)}
    assert sorted(deferred - set(DEFERRED_IMPORTS)) == [], "deferred imports not named"
    assert sorted(set(DEFERRED_IMPORTS) - deferred) == [], "named but no longer there"


def test_deferred_imports_hide_no_cycle_either() -> None:
    edges: dict[str, set[str]] = {}
    for imp in all_imports():
        if imp.kind != "type_checking" and _inside(imp.imported):
            edges.setdefault(imp.importer, set()).add(imp.imported)
    cycles = import_cycles(edges)
    assert not cycles, "modules importing each other:\n" + "\n".join(map(" ".join, cycles))


def test_the_inner_layers_import_no_server_client_nor_io() -> None:
    offending = sorted({
        f"{_short(imp.importer)}:{imp.line} imports {imp.imported} ({imp.kind})"
        for imp in all_imports()
        if unit_of(imp.importer) in INNER_UNITS
        and any(imp.imported == f or imp.imported.startswith(f + ".")
                for f in FORBIDDEN_IN_INNER)})
    assert not offending, "\n".join(offending)


LUA_TEXT = re.compile(r"redis\.p?call\s*\(|\blocal\s+\w+\s*=|\breturn\s+redis\.")
"""What only Lua source holds (docstrings may name ``KEYS[11]``, never call Redis)."""


def test_hot_scripts_holds_no_lua_text() -> None:
    path = PACKAGE_DIR / "hot" / "scripts.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lua = sorted({node.lineno for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str)
                 and LUA_TEXT.search(node.value)})
    assert lua == [], f"Lua text in hot/scripts.py at lines {lua}"


def test_every_unit_of_the_package_has_one_row_in_the_layer_table() -> None:
    units = sorted({unit_of(m) for m in package_modules()})
    in_table = sorted(u for _, row, _ in LAYERS for u in row)
    assert in_table == units


def test_every_import_points_down_the_layer_table() -> None:
    row_of = {u: i for i, (_, units, _) in enumerate(LAYERS) for u in units}
    upward = []
    for imp in all_imports():
        if not _inside(imp.imported):
            continue
        a, b = unit_of(imp.importer), unit_of(imp.imported)
        if a != b and row_of[b] >= row_of[a]:
            upward.append(f"{_short(imp.importer)}:{imp.line} ({a}, row {LAYERS[row_of[a]][0]})"
                          f" imports {_short(imp.imported)} ({b}, row {LAYERS[row_of[b]][0]})")
    assert not upward, "\n".join(upward)


def test_the_architecture_doc_shows_the_layer_table() -> None:
    text = ARCHITECTURE_DOC.read_text(encoding="utf-8")
    assert f"```\n{layer_drawing()}\n```" in text, (
        "docs/architecture.md's layer drawing differs from LAYERS: paste the output of "
        "`python tests/unit/test_layers.py`")


def test_the_architecture_doc_names_where_every_plan_lives() -> None:
    text = ARCHITECTURE_DOC.read_text(encoding="utf-8")
    assert plan_table() in text, (
        "docs/architecture.md's plan table differs from the code: paste the output of "
        "`python tests/unit/test_layers.py --plans`")


if __name__ == "__main__":
    sys.stdout.write((plan_table() if "--plans" in sys.argv else layer_drawing()) + "\n")
