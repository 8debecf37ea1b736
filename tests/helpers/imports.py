"""The project's import graph, read from the sources' AST (tests/test_import_graph.py): which modules a
module's import statements execute, and the cycles among them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.paths import REPO_ROOT

ENGINE = "dv_assets.mirror"
PACKAGES = ("dv_assets", "resources")
# The platform: the dg defs folder, the component, the resource, the code location and its CI command.
PLATFORM = (
    "dv_assets/defs",
    "dv_assets/components",
    "resources",
    "dv_assets/definitions.py",
    "dv_assets/ci_checks.py",
)
# What loads the defs folder: nothing the folder (or what it uses) imports may import them back.
LOADERS = ("dv_assets.definitions", "dv_assets.ci_checks")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(*roots: str) -> dict[str, Path]:
    """Module name → file, for every Python file under the roots (folders or files)."""
    found: dict[str, Path] = {}
    for root in roots:
        path = REPO_ROOT / root
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            found[module_name(file)] = file
    return found


PROJECT = modules(*PACKAGES)


def everywhere(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of the module: at module level, in functions, under TYPE_CHECKING."""
    return (n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom))


def imported(module: str, statement: ast.Import | ast.ImportFrom) -> list[tuple[str, str | None]]:
    """(module, name) pairs the statement imports: `import a.b` → (a.b, None); `from a import x` → (a, x).
    Relative imports are resolved against `module`."""
    if isinstance(statement, ast.Import):
        return [(alias.name, None) for alias in statement.names]
    base = statement.module or ""
    if statement.level:
        package = module if PROJECT[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(statement.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [(base, alias.name) for alias in statement.names]


def dependencies(module: str, statement: ast.Import | ast.ImportFrom) -> set[str]:
    """The project modules the statement executes: the imported module and its parent packages, and for
    `from package import name` the submodule `name`. A package the importing module is in is already
    being imported: an edge to it only for a name taken from its `__init__`."""

    def outside(package: str) -> bool:
        return not module.startswith(f"{package}.")

    found: set[str] = set()
    for target, name in imported(module, statement):
        parts = target.split(".")
        found |= {p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if outside(p)}
        if name is not None and f"{target}.{name}" in PROJECT:
            found |= {f"{target}.{name}"} | ({target} if outside(target) else set())
        else:
            found.add(target)
    return {m for m in found if m in PROJECT}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of `graph` (module → modules it imports) closes."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for dependency in sorted(graph[module]):
            if state.get(dependency) == 1:
                cycles.append([*path[path.index(dependency) :], dependency])
            elif dependency not in state:
                visit(dependency)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles
