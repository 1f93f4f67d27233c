"""One public surface (issue 37): what users read imports from the package root or a
documented subpackage, and only the names those export.

Scanned: README.md, docs/*.md, examples/**/*.py and examples/**/*.md, notebooks/*.ipynb
(code cells). Allowed: ``from langgraph_durable import X`` and ``from
langgraph_durable.<sub> import X`` for ``<sub>`` in ``PUBLIC_MODULES``, with ``X`` in that
module's ``__all__`` (read with ``ast``, nothing imported). The files for contributors
(``EXEMPT_FILES``) and a few demo imports of the operator tools' internals
(``ALLOWED_INTERNAL``, each with its reason) are the only exceptions.
"""

from __future__ import annotations

import ast
import functools
import json
import pathlib
import re
import warnings
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "langgraph_durable"

PUBLIC_MODULES = ("", "compaction", "serde", "dashboard", "testing")
"""The package root ("") and the documented subpackages users import from."""

EXTRA_ROOT_NAMES = frozenset({"__version__", "ModelJournalMiddleware"})
"""Root names outside a plain ``__all__`` read: ``__version__``; ``ModelJournalMiddleware``
is in ``__all__`` but served by the module ``__getattr__`` (listed for clarity)."""

EXEMPT_FILES = frozenset({
    "docs/architecture.md",  # for contributors: names modules inside the package
})

ALLOWED_INTERNAL: dict[tuple[str, str], str] = {
    # (file, module imported) -> why a user-facing example reaches inside the package
    ("examples/crash_demo.py", f"{PACKAGE}.inspection.effect_view"):
        "the demo polls the model-call journal every 5 ms to pick its kill point, as "
        "`langgraph-durable show` reads it; no public call reads a thread's journal",
    ("examples/crash_demo.py", f"{PACKAGE}.inspection.strict"):
        "the same poll decodes strictly, as the operator's tools do",
    ("examples/dashboard_demo.py", f"{PACKAGE}.inspection"):
        "the demo forks a thread (`lookup.fork`) as the dashboard's time machine does, "
        "to show a forked thread in the screenshots",
}

IMPORT_LINE = re.compile(
    r"^\s*(?:from\s+(?P<from>langgraph_durable[\w.]*)\s+import\s+(?P<names>\(?[^#\n]*)"
    r"|import\s+(?P<mod>langgraph_durable[\w.]*))", re.M)


def scanned_files() -> list[pathlib.Path]:
    """Every file whose imports users copy."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "examples").rglob("*.py")),
             *sorted((ROOT / "examples").rglob("*.md")),
             *sorted((ROOT / "notebooks").glob("*.ipynb"))]
    return [f for f in files if f.relative_to(ROOT).as_posix() not in EXEMPT_FILES]


def _text_imports(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line, module, names) of each import line of ``langgraph_durable`` in ``text``
    (Markdown code or a notebook cell; a parenthesised name list may span lines)."""
    for m in IMPORT_LINE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m.group("mod"):
            yield line, m.group("mod"), []
            continue
        names = m.group("names")
        if names.startswith("("):
            end = text.find(")", m.start("names"))
            names = text[m.start("names") + 1:end]
        yield line, m.group("from"), [n.split(" as ")[0].strip()
                                      for n in names.replace("\\", "").split(",") if n.strip()]


def _py_imports(text: str) -> Iterator[tuple[int, str, list[str]]]:
    with warnings.catch_warnings():  # an example's invalid escape is not this test's
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module and (
                node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    yield node.lineno, alias.name, []


def imports_in(path: pathlib.Path) -> Iterator[tuple[str, str, list[str]]]:
    """(where, module, names) of every import of the package in ``path``; ``where`` is
    ``file:line`` (``file:cell N line M`` in a notebook)."""
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        for line, module, names in _py_imports(text):
            yield f"{rel}:{line}", module, names
    elif path.suffix == ".ipynb":
        for i, cell in enumerate(json.loads(text)["cells"]):
            if cell["cell_type"] == "code":
                for line, module, names in _text_imports("".join(cell["source"])):
                    yield f"{rel}:cell {i} line {line}", module, names
    else:
        for line, module, names in _text_imports(text):
            yield f"{rel}:{line}", module, names


@functools.cache
def exported(sub: str) -> frozenset[str]:
    """The ``__all__`` of ``langgraph_durable`` (``sub`` = "") or of its subpackage
    ``sub``, read from its ``__init__.py`` (``__all__ = [...]`` and ``__all__ += [...]``)."""
    init = ROOT / PACKAGE / sub / "__init__.py"
    names: set[str] = set()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AugAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert isinstance(node, (ast.Assign, ast.AugAssign))
            names.update(ast.literal_eval(node.value))
    return frozenset(names | (EXTRA_ROOT_NAMES if sub == "" else set()))


def problems() -> list[str]:
    """One line per import users would copy from a path that is not public."""
    public = {(f"{PACKAGE}.{s}" if s else PACKAGE): s for s in PUBLIC_MODULES}
    found = []
    for path in scanned_files():
        rel = path.relative_to(ROOT).as_posix()
        for where, module, names in imports_in(path):
            if (rel, module) in ALLOWED_INTERNAL:
                continue
            if module not in public:
                found.append(f"{where}: imports {module}, not public: import from "
                             f"{PACKAGE}[.{'|.'.join(s for s in PUBLIC_MODULES if s)}] "
                             f"(export the name there if it is missing)")
                continue
            missing = [n for n in names if n != "*" and n not in exported(public[module])]
            if missing:
                found.append(f"{where}: {', '.join(missing)} not in {module}.__all__")
    return found


def test_docs_examples_and_notebooks_import_only_the_public_surface() -> None:
    assert problems() == []


def test_the_exceptions_are_still_needed() -> None:
    used = {(path.relative_to(ROOT).as_posix(), module) for path in scanned_files()
            for _, module, _ in imports_in(path)}
    assert sorted(set(ALLOWED_INTERNAL) - used) == [], "ALLOWED_INTERNAL names unused imports"
    assert all((ROOT / f).exists() for f in EXEMPT_FILES), "EXEMPT_FILES names a lost file"


def test_the_scan_sees_markdown_and_notebook_imports() -> None:
    text = ("```python\nfrom langgraph_durable.shared import env_saver\n"
            "from langgraph_durable import (\n    DurableSaver,\n    once,\n)\n```\n")
    assert list(_text_imports(text)) == [(2, f"{PACKAGE}.shared", ["env_saver"]),
                                         (3, PACKAGE, ["DurableSaver", "once"])]
    assert len(scanned_files()) > 20
