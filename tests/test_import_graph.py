"""The import graph, from the sources' AST: the Dagster platform imports the engine's modules by name
(no facade in between), the engine imports no Dagster and nothing of the platform, nothing in the defs
folder imports the modules that load it, and no module of the project imports one that imports it
back: at module level, in a function or under TYPE_CHECKING alike
(an import deferred into a function is still an arrow)."""

from __future__ import annotations

import ast
import subprocess
import sys

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


def test_the_platform_imports_the_engines_modules_by_name() -> None:
    """Every import of the engine by the platform names the module that defines what it takes, and the
    engine's package defines nothing (no lazy facade to hide the arrows): the plan draws the platform
    above the engine with every real arrow."""
    assert ast.parse((REPO_ROOT / "dv_assets/mirror/__init__.py").read_text()).body[1:] == []
    platform = modules(*PLATFORM)
    assert len(platform) > 10 and {"dv_assets.defs.iceberg.checks", "resources.spark"} <= set(platform)
    through_package, loaders, engine_modules = [], [], set()
    for module, path in platform.items():
        for statement in everywhere(ast.parse(path.read_text())):
            for target, name in imported(module, statement):
                where = f"{path.relative_to(REPO_ROOT)}:{statement.lineno}"
                if target == ENGINE and f"{target}.{name}" not in PROJECT:
                    through_package.append(f"{where} {name}")
                if target.startswith(f"{ENGINE}."):
                    engine_modules.add(target)
                if module not in LOADERS and (target in LOADERS or f"{target}.{name}" in LOADERS):
                    loaders.append(f"{where} {target}")
    assert through_package == [], f"taken from the package {ENGINE}, not from the module that defines it"
    assert {
        "dv_assets.mirror.range_sync",
        "dv_assets.mirror.settings",
        "dv_assets.mirror.table_spec",
    } <= engine_modules
    assert loaders == [], "the defs folder imports what loads it"


# What the engine never imports: Dagster and its libraries, and the platform built on the engine.
PLATFORM_PACKAGES = ("dagster", "dagster_*", "dv_assets.defs", "dv_assets.components")


def _is_platform(target: str) -> bool:
    for package in PLATFORM_PACKAGES:
        if package.endswith("*"):
            if target.startswith(package[:-1]):
                return True
        elif target == package or target.startswith(f"{package}."):
            return True
    return False


def test_the_engine_imports_no_dagster_and_nothing_of_the_platform() -> None:
    """Nothing under dv_assets/mirror/ imports Dagster (`dagster`, `dagster_*`) or the platform
    (`dv_assets.defs`, `dv_assets.components`): at module level, in a function or under TYPE_CHECKING."""
    engine = modules("dv_assets/mirror")
    assert len(engine) > 40 and "dv_assets.mirror.table_spec" in engine
    found = []
    for module, path in engine.items():
        for statement in everywhere(ast.parse(path.read_text())):
            for target, name in imported(module, statement):
                named = f"{target}.{name}" if name is not None else target
                if _is_platform(target) or _is_platform(named):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{statement.lineno} {named}")
    assert found == [], "the engine imports Dagster or the platform"


def test_the_platform_check_sees_every_kind_of_import() -> None:
    """The check above on the forms an import takes: `import dagster`, `from dagster_spark import x`,
    `from dv_assets import defs`, `from dv_assets.components.delta_mirror import y`, deferred into a
    function and under TYPE_CHECKING."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "import dagster as dg\n"
        "if TYPE_CHECKING:\n    from dagster_spark import spark_resource\n"
        "def f():\n    from dv_assets import defs\n    from dv_assets.components.delta_mirror import y\n"
        "from dv_assets.mirror import TableSpec\n"
    )
    hits = [
        f"{target}.{name}" if name is not None else target
        for statement in everywhere(ast.parse(source))
        for target, name in imported("dv_assets.mirror.table_spec", statement)
        if _is_platform(target) or (name is not None and _is_platform(f"{target}.{name}"))
    ]
    assert hits == [
        "dagster",
        "dagster_spark.spark_resource",
        "dv_assets.defs",
        "dv_assets.components.delta_mirror.y",
    ]


def test_a_tables_file_is_read_without_dagster(tmp_path) -> None:
    """`dvmirror sync --tables`'s loader and the fleet's CLI load no Dagster module (nor pyspark)."""
    tables = tmp_path / "tables.yaml"
    tables.write_text(
        "type: dv_assets.components.DeltaMirrorComponent\n"
        "attributes: {name: a, delta_path: '{{ env.HOME }}/t', iceberg_table: n.a}\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from dv_assets.mirror.cli import fleet; from dv_assets.mirror.settings import "
            "CatalogConfig; from dv_assets.mirror.table_spec import load_tables_file; "
            f"((spec, _),) = load_tables_file({str(tables)!r}, CatalogConfig.under('/tmp')); "
            "assert spec.delta_path.endswith('/t'), spec; "
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('dagster', 'pyspark') "
            "or m.startswith(('dagster_', 'dv_assets.defs', 'dv_assets.components'))); "
            "assert not loaded, loaded",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_no_import_cycle_among_the_projects_modules() -> None:
    graph = {
        module: set().union(*(dependencies(module, s) for s in everywhere(ast.parse(path.read_text()))))
        - {module}
        for module, path in PROJECT.items()
    }
    assert graph["dv_assets.defs.factory"] >= {"dv_assets.defs.sensors", "resources.spark"}
    # Function-level imports are arrows too: the subcommands load Spark only when they need it.
    assert "dv_assets.mirror.spark" in graph["dv_assets.mirror.cli.arguments"]
    assert "dv_assets.mirror.dv_findings" in graph["dv_assets.defs.iceberg.checks"]

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


def test_the_configuration_and_the_delta_side_need_no_pyspark() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from dv_assets.mirror.settings import CatalogConfig, MirrorSettings; "
            "from dv_assets.mirror.delta.replay import DeltaTable; "
            "from dv_assets.mirror.iceberg.pyiceberg_reader import read_mirror_table, last_mirrored_version; "
            "assert 'pyspark' not in sys.modules, 'pyspark'",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
