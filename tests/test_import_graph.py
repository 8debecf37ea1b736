"""The import graph, from the sources' AST: the Dagster platform reaches the engine only through
`dv_assets.mirror`'s exported names, nothing in it imports the modules that load it, and no module of the
project imports one that imports it back: at module level, in a function or under TYPE_CHECKING alike
(an import deferred into a function is still an arrow)."""

from __future__ import annotations

import ast
import subprocess
import sys

import dv_assets.mirror
from tests.helpers.imports import (
    ENGINE,
    LOADERS,
    PLATFORM,
    PROJECT,
    dependencies,
    everywhere,
    import_cycles,
    imported,
    modules,
)
from tests.helpers.paths import REPO_ROOT


def test_the_platform_imports_the_engine_only_through_its_exported_names() -> None:
    platform = modules(*PLATFORM)
    assert len(platform) > 10 and {"dv_assets.defs.iceberg.checks", "resources.spark"} <= set(platform)
    deep, unexported, loaders = [], [], []
    for module, path in platform.items():
        for statement in everywhere(ast.parse(path.read_text())):
            for target, name in imported(module, statement):
                where = f"{path.relative_to(REPO_ROOT)}:{statement.lineno}"
                if target.startswith(f"{ENGINE}."):
                    deep.append(f"{where} {target}")
                elif name is None and target == ENGINE:
                    deep.append(f"{where} import {ENGINE} (import the names)")
                elif target == ENGINE and name not in dv_assets.mirror.__all__:
                    unexported.append(f"{where} {name}")
                if module not in LOADERS and (target in LOADERS or f"{target}.{name}" in LOADERS):
                    loaders.append(f"{where} {target}")
    assert deep == [], "the platform imports engine modules directly"
    assert unexported == [], f"not exported by {ENGINE}"
    assert loaders == [], "the defs folder imports what loads it"


def test_no_import_cycle_among_the_projects_modules() -> None:
    graph = {
        module: set().union(*(dependencies(module, s) for s in everywhere(ast.parse(path.read_text()))))
        - {module}
        for module, path in PROJECT.items()
    }
    assert graph["dv_assets.defs.factory"] >= {"dv_assets.defs.sensors", "resources.spark"}
    # Function-level imports are arrows too: the subcommands load Spark only when they need it.
    assert "dv_assets.mirror.spark" in graph["dv_assets.mirror.cli.arguments"]
    assert "dv_assets.mirror.dv_findings" in graph["dv_assets.defs.iceberg.checks"]  # through the lazy export

    assert import_cycles(graph) == []


def test_no_import_cycle_among_the_engines_folders() -> None:
    """A folder of the engine (delta/, dv/, iceberg/, cli/) is one room: no folder imports one that
    imports it back (an arrow up), though no module cycle need run through the two."""
    room = {
        module: ".".join(module.split(".")[:3]) if module.count(".") >= 3 else module
        for module in PROJECT
        if module.startswith(f"{ENGINE}.")
    }
    graph: dict[str, set[str]] = {}
    for module, folder in room.items():
        targets = set().union(
            *(dependencies(module, s) for s in everywhere(ast.parse(PROJECT[module].read_text())))
        )
        graph.setdefault(folder, set()).update(room[t] for t in targets if t in room and room[t] != folder)
    assert {"dv_assets.mirror.delta", "dv_assets.mirror.dv"} <= graph.keys()
    assert "dv_assets.mirror.dv" in graph["dv_assets.mirror.delta"]  # a Delta file's DV is read by dv/
    assert import_cycles(graph) == []


def test_every_exported_name_resolves_and_the_configuration_needs_no_pyspark() -> None:
    for name in dv_assets.mirror.__all__:
        assert getattr(dv_assets.mirror, name) is not None
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from dv_assets.mirror import CatalogConfig, DeltaTable, MirrorSettings, "
            "read_mirror_table, last_mirrored_version; assert 'pyspark' not in sys.modules, 'pyspark'",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
