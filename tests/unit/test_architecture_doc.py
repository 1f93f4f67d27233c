"""docs/architecture.md names only what the code has (issue 37).

Read with ``ast`` and plain file reads (nothing imported), each check a test below:

- the folder table lists exactly the package's modules (every ``.py`` file once; a
  folder's ``__init__.py`` is covered by its folder's row);
- the import directions inside folders name modules of those folders;
- every code name in the thread-state tables, the thread-status table and the glossary
  exists: a path (``core/items.py``, ``hot/lua/``) is a file or folder, ``Name`` is defined
  in the package (a def, class, assignment, slot, or a string the code or a Lua script
  uses), ``module.name`` / ``folder/module.name`` / ``Class.attr`` is defined there, a
  script named in capitals (``ACK_SETTLE``) is ``hot/lua/ack_settle.lua``;
- the thread-status table has exactly ``core/thread_summary.py``'s ``STATUSES``, those
  needing attention exactly its ``ATTENTION``.

Each failure names the stale or missing names and what to do with them.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re
from dataclasses import dataclass

from .test_layers import parsed

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "langgraph_durable"
DOC = ROOT / "docs" / "architecture.md"
LUA_DIR = PACKAGE_DIR / "hot" / "lua"

FOLDER_TABLE = "| folder or module | modules | owns |"
STATE_TABLE = "| where | field | meaning | set by | cleared by |"
STATUS_TABLE = "| status | when | needs attention |"
GLOSSARY_TABLE = "| term | meaning | in the code |"

NOT_SCRIPTS = frozenset({
    # capitalised words of the tables that are not scripts of hot/lua/: Redis commands
    # and terms, refusal codes
    "DEL", "FT", "HSETNX", "KNN", "MISSING_ITEMS", "NUL", "PEL", "PERSIST", "TIME", "TTL",
    "XACK", "XAUTOCLAIM", "XDEL", "XREADGROUP",
})

BACKTICKED = re.compile(r"`([^`]+)`")
CAPITALS = re.compile(r"(?<![\w`<])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![\w`])|(?<![\w`<.])"
                      r"(?:PUT|BIND|RELEASE)(?![\w`])")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
LUA_NAME = re.compile(r"'([A-Za-z_]\w*)'|\bfunction\s+([A-Za-z_]\w*)|\blocal\s+([A-Za-z_]\w*)")


def doc_text() -> str:
    """docs/architecture.md."""
    return DOC.read_text(encoding="utf-8")


def table(header: str) -> list[list[str]]:
    """The rows (cells stripped) of the doc's table under the line ``header``."""
    lines = doc_text().splitlines()
    assert header in lines, f"docs/architecture.md has no table {header!r}"
    rows = []
    for line in lines[lines.index(header) + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def tables(header: str) -> list[list[str]]:
    """The rows of every table of the doc under a line ``header``."""
    lines = doc_text().splitlines()
    rows = []
    for i, line in enumerate(lines):
        if line == header:
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]])
    return rows


@functools.cache
def modules() -> dict[str, pathlib.Path]:
    """Every module of the package: path under langgraph_durable/ (``hot/keys.py``) ->
    its file."""
    return {p.relative_to(PACKAGE_DIR).as_posix(): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def tree(rel: str) -> ast.Module:
    """The syntax tree of module ``rel`` (``hot/keys.py``), parsed once per test run (the
    cache test_layers.py fills too)."""
    return parsed(modules()[rel])


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    return []


def _names_of(target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Attribute):
        return {target.attr}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_names_of(t) for t in target.elts))
    return set()


def _body_names(body: list[ast.stmt]) -> set[str]:
    """Names a module or class body defines at its own level (defs, classes, assignments,
    imports, ``__slots__``)."""
    found: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).split(".")[0] for a in node.names)
        for t in _targets(node):
            found |= _names_of(t)
            if isinstance(t, ast.Name) and t.id == "__slots__" and node.value is not None:
                found.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return found


@dataclass(frozen=True)
class Names:
    """What the package defines: per module its module-level names, per class what its
    body defines and the ``self.x`` its methods set (same-named classes merged), and
    every name anywhere (defs, classes, arguments, assignment targets, identifier-like
    short string constants of the Python, quoted words of the Lua scripts such as the
    stored field ``'dirty'``, and the functions and locals of the Lua)."""

    of_module: dict[str, frozenset[str]]
    of_class: dict[str, frozenset[str]]
    anywhere: frozenset[str]


@functools.cache
def names() -> Names:
    """The package's names, read in one walk of each module's tree."""
    of_module: dict[str, frozenset[str]] = {}
    of_class: dict[str, set[str]] = {}
    anywhere: set[str] = set()
    for rel in modules():
        module = tree(rel)
        of_module[rel] = frozenset(_body_names(module.body))
        anywhere |= of_module[rel]
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef):
                members = of_class.setdefault(node.name, set())
                members |= _body_names(node.body)
                for sub in ast.walk(node):
                    for t in _targets(sub):
                        if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                and t.value.id == "self"):
                            members.add(t.attr)
                anywhere |= members | {node.name}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                anywhere.add(node.name)
            elif isinstance(node, ast.arg):
                anywhere.add(node.arg)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(
                    node.value) < 40:  # a field or collection name, not a docstring
                anywhere.update(IDENT.findall(node.value))
            for target in _targets(node):
                anywhere |= _names_of(target)
    for lua in LUA_DIR.rglob("*.lua"):  # quoted field names, functions, locals
        for match in LUA_NAME.findall(lua.read_text(encoding="utf-8")):
            anywhere.update(n for n in match if n)
    return Names(of_module, {k: frozenset(v) for k, v in of_class.items()},
                 frozenset(anywhere))


@functools.cache
def module_by_stem() -> dict[str, str]:
    """Module basename (``effect_journal``) -> its path (``plans/effect_journal.py``);
    the package's basenames are unique, ``__init__`` aside."""
    return {pathlib.PurePosixPath(rel).stem: rel for rel in modules()
            if not rel.endswith("__init__.py")}


def scripts() -> frozenset[str]:
    """The Redis scripts, in capitals: ``hot/lua/ack_settle.lua`` -> ``ACK_SETTLE``."""
    return frozenset(p.stem.upper() for p in LUA_DIR.glob("*.lua"))


def _path_problem(token: str) -> str | None:
    path = token.rstrip("/")
    if path.startswith(("tests/", "docs/", "benchmarks/", "faults/")):
        return None if (ROOT / path).exists() else f"no file {token}"
    return None if (PACKAGE_DIR / path).exists() else f"no langgraph_durable/{token}"


def name_problem(token: str, module: str | None = None) -> str | None:
    """Why the code name ``token`` (one backticked span) names nothing, None when it
    names something or is not a code name (it holds spaces, ``<...>``, punctuation).
    ``module``: the module a bare name was named in (``core/records.py`` `member`)."""
    token = token.strip()
    token = re.sub(r"\(.*\)$", "", token)  # `env_saver()`, `PageReply.of(raw)`
    if not token or re.search(r"[\s<>*!\"'=,;:\[\]{}#@+$%^&|~]", token):
        return None
    if token.endswith(("/", ".py", ".lua")):
        return _path_problem(token)
    if "/" in token:  # folder/module.name
        path, _, name = token.rpartition(".")
        rel = path + ".py"
        if rel not in modules():
            return f"no module langgraph_durable/{rel}"
        return None if name in names().of_module[rel] else f"{name} is not defined in {rel}"
    if "." in token:
        qualifier, _, name = token.rpartition(".")
        if not IDENT.fullmatch(qualifier) or not IDENT.fullmatch(name):
            return None
        if qualifier in names().of_class:
            return None if name in names().of_class[qualifier] else (
                f"class {qualifier} defines no {name}")
        rel = module_by_stem().get(qualifier)
        if rel is None:
            return f"{qualifier} is no module nor class of the package"
        return None if name in names().of_module[rel] else f"{name} is not defined in {rel}"
    if not IDENT.fullmatch(token):
        return None
    if module is not None:
        return None if token in names().of_module[module] else f"{token} is not defined in {module}"
    return None if token in names().anywhere else f"{token} is defined nowhere in the package"


def cell_problems(cell: str, check_scripts: bool) -> list[str]:
    """The code names of one table cell that name nothing: its backticked spans (a bare
    name right after a module path is looked up in that module) and, with
    ``check_scripts``, its script names in capitals."""
    found = []
    spans = list(BACKTICKED.finditer(cell))
    for i, m in enumerate(spans):
        token = m.group(1)
        module = None
        if i and IDENT.fullmatch(token) and cell[spans[i - 1].end():m.start()] == " ":
            before = spans[i - 1].group(1)
            module = before if before in modules() else None
        problem = name_problem(token, module)
        if problem:
            found.append(f"`{token}`: {problem}")
    if check_scripts:
        plain = BACKTICKED.sub(" ", cell)
        for word in CAPITALS.findall(plain):
            if word not in scripts() and word not in NOT_SCRIPTS:
                found.append(f"{word}: no script hot/lua/{word.lower()}.lua (a Redis command "
                             f"or term? add it to NOT_SCRIPTS)")
    return found


def folder_table_modules() -> tuple[set[str], list[str]]:
    """The modules the folder table lists (paths under langgraph_durable/), and its
    entries that are no file or folder."""
    listed: set[str] = set()
    bad: list[str] = []
    for row in table(FOLDER_TABLE):
        first, entries = row[0], BACKTICKED.findall(row[1])
        folder = ""
        first_code = BACKTICKED.fullmatch(first)
        if first_code and first_code.group(1).endswith("/"):
            folder = first_code.group(1)
            listed.add(folder + "__init__.py")
        elif first_code:
            entries = [first_code.group(1), *entries]
        for entry in entries:
            rel = folder + entry + ("__init__.py" if entry.endswith("/") else "")
            if rel in modules():
                listed.add(rel)
            else:
                bad.append(folder + entry)
    return listed, bad


def test_the_folder_table_lists_exactly_the_modules_of_the_package() -> None:
    listed, bad = folder_table_modules()
    missing = sorted(set(modules()) - listed)
    stale = sorted(set(bad) | (listed - set(modules())))
    assert (missing, stale) == ([], []), (
        "docs/architecture.md's folder table differs from the package:\n"
        f"  add (modules that exist, under their folder's row): {missing}\n"
        f"  remove (listed, no such module): {stale}")


def test_the_import_directions_inside_folders_name_their_modules() -> None:
    text = doc_text()
    start = text.index("Inside a folder imports are one-way too")
    paragraph = text[start:text.index("\n\n", start)]
    wrong = []
    folder = None
    for token in BACKTICKED.findall(paragraph):
        if token.endswith("/"):
            folder = token
        elif folder and IDENT.fullmatch(token) and not {
                f"{folder}{token}.py", f"{folder}{token}/__init__.py"} & set(modules()):
            wrong.append(f"{folder}{token}.py")
    assert wrong == [], (
        "docs/architecture.md's import directions inside folders name modules that do "
        f"not exist (rename or remove them): {wrong}")


def test_the_thread_state_tables_name_only_what_the_code_has() -> None:
    rows = tables(STATE_TABLE)
    assert len(rows) > 20
    found = []
    for row in rows:
        for i, cell in enumerate(row):
            for problem in cell_problems(cell, check_scripts=i >= 3):
                found.append(f"{row[0]} {row[1]}: {problem}")
    assert found == [], ("docs/architecture.md's thread-state tables name what the code does "
                         "not have (rename to the code's name or remove):\n"
                         + "\n".join(found))


def test_the_glossary_names_only_what_the_code_has() -> None:
    rows = table(GLOSSARY_TABLE)
    assert len(rows) > 20
    found = [f"{row[0]}: {problem}" for row in rows
             for i, cell in enumerate(row) for problem in cell_problems(cell, i == 2)]
    assert found == [], ("docs/architecture.md's glossary names what the code does not have "
                         "(rename to the code's name or remove):\n" + "\n".join(found))


def _constant(rel: str, name: str) -> object:
    for node in tree(rel).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and name in set().union(
                *(_names_of(t) for t in _targets(node))):
            assert node.value is not None
            return ast.literal_eval(node.value)
    raise AssertionError(f"{rel} defines no {name}")


def test_the_thread_status_table_has_exactly_the_statuses_of_the_code() -> None:
    rows = table(STATUS_TABLE)
    statuses = [BACKTICKED.fullmatch(r[0]).group(1) if BACKTICKED.fullmatch(r[0]) else r[0]
                for r in rows]
    attention = [s for s, r in zip(statuses, rows) if r[2] == "yes"]
    code = _constant("core/thread_summary.py", "STATUSES")
    code_attention = _constant("core/thread_summary.py", "ATTENTION")
    assert isinstance(code, tuple) and isinstance(code_attention, tuple)
    assert sorted(statuses) == sorted(code), (
        f"docs/architecture.md's thread-status table: add {sorted(set(code) - set(statuses))}"
        f", remove {sorted(set(statuses) - set(code))} (core/thread_summary.py STATUSES)")
    assert sorted(attention) == sorted(code_attention), (
        "docs/architecture.md's thread-status table: 'needs attention' must be yes exactly "
        f"for {sorted(code_attention)} (core/thread_summary.py ATTENTION)")
    for row in rows:
        for problem in cell_problems(row[1], check_scripts=False):
            raise AssertionError(f"thread-status table, {row[0]}: {problem}")


def test_the_checks_catch_stale_names() -> None:
    assert name_problem("Items.held") == "class Items defines no held"
    assert name_problem("_SETTLE_THREAD") == "_SETTLE_THREAD is defined nowhere in the package"
    assert name_problem("registry.register_plan") == (
        "registry is no module nor class of the package")
    assert name_problem("hot/registry.py") == "no langgraph_durable/hot/registry.py"
    assert name_problem("plans/fence.py") is None
    assert name_problem("fence.fence_plan") is None
    assert name_problem("ThreadKeys.bl") is None
    assert cell_problems("TAKE_BACK, ACK_SETTLE (XACK)", check_scripts=True) == [
        "TAKE_BACK: no script hot/lua/take_back.lua (a Redis command or term? add it to "
        "NOT_SCRIPTS)"]
