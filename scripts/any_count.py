"""Count ``Any`` in the package's annotations, per module and per layer.

An annotation is a parameter's, a return's or a variable's (``x: T``); with ``from
__future__ import annotations`` every one of them is a string, and string annotations
(also quoted ones inside others, ``list["Any"]``) are parsed and counted too. Counted are
the nodes ``Name(id="Any")`` and ``Attribute(attr="Any")`` (``typing.Any``). ``cast(Any,
...)`` and other uses outside annotations are not counted.

Usage: ``python scripts/any_count.py [--modules]`` from the repository's root. Prints
the count per layer (a sub-package or a top-level module), the total of the inner
layers ``core/ plans/ hot/ durable/`` (issue 25's target: under 10) and, with
``--modules``, every module with at least one. Reads the source files with ``ast``;
imports nothing.
"""

from __future__ import annotations

import ast
import pathlib
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "langgraph_durable"
INNER = ("core", "plans", "hot", "durable")


def _anys(node: ast.AST | None) -> int:
    """``Any`` nodes in the annotation ``node``, string annotations parsed."""
    if node is None:
        return 0
    count = 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            count += 1
        elif isinstance(sub, ast.Attribute) and sub.attr == "Any":
            count += 1
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                parsed = ast.parse(sub.value.strip(), mode="eval")
            except SyntaxError:
                continue  # a Literal["..."] string, not an annotation
            count += _anys(parsed.body)
    return count


def any_count(source: str) -> int:
    """``Any`` in the annotations of one module's ``source``."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg,
                     args.kwarg]
            count += sum(_anys(a.annotation) for a in every if a is not None)
            count += _anys(node.returns)
        elif isinstance(node, ast.AnnAssign):
            count += _anys(node.annotation)
    return count


def counts() -> dict[str, int]:
    """Module path relative to the package (``plans/read.py``) -> its count."""
    return {str(p.relative_to(PACKAGE_DIR)): any_count(p.read_text(encoding="utf-8"))
            for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def layer_of(module: str) -> str:
    """``plans/read.py`` -> ``plans/``; a top-level module is its own layer."""
    head, sep, _ = module.partition("/")
    return head + "/" if sep else head


def main(argv: list[str]) -> int:
    """Print the counts; returns the exit status (0)."""
    per_module = counts()
    per_layer: Counter[str] = Counter()
    for module, n in per_module.items():
        per_layer[layer_of(module)] += n
    if "--modules" in argv:
        print("per module")
        for module, n in sorted(per_module.items(), key=lambda kv: (-kv[1], kv[0])):
            if n:
                print(f"  {n:4d}  {module}")
    print("per layer")
    for layer, n in sorted(per_layer.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:4d}  {layer}")
    inner = sum(per_layer[f"{u}/"] for u in INNER)
    print(f"inner layers ({' '.join(u + '/' for u in INNER)}): {inner} (target: under 10)")
    print(f"package: {sum(per_module.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
