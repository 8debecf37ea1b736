"""The code location (`[tool.dg.project]` in pyproject.toml, workspace.yaml, dagster_cloud.yaml).

Tables are `DeltaMirrorComponent` documents (dv_assets/components/delta_mirror.py), read from one place:

* a checkout (or the packaged copy): the dg defs folder `dv_assets/defs/`, whose `tables/defs.yaml` holds
  one document per table; any other component put in the defs folder loads with them;
* an installed package pointed at another list: a file of the same documents named by
  `$DVMIRROR_SOURCES`, or `sources.yaml` in the working directory (`MirrorSettings.sources_file`). It
  replaces the packaged tables. A file named by `$DVMIRROR_SOURCES` must exist: a name that names no file
  fails the code location's load (`TablesFileError`), never falls back to the packaged tables; so does
  every bad file (one line naming the file, the line and the key).

Either way the tables must share one Iceberg catalog (one Spark session per process): a conflict is
refused by name before anything is built.

The mirror's settings are resolved once, here (`load_definitions`), and flow down: the tables' shared
catalog (their `catalog`, else the environment's) replaces the resolved one, and the resulting settings
go to every table's definitions, whose `spark` resource holds them and whose sensors, checks and Delta-log
readers use the same catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import dagster as dg

import dv_assets.defs
from dv_assets.components.delta_mirror import DeltaMirrorComponent, TablesFileError, load_mirrors_file
from dv_assets.dagster_warnings import silence_dagster_maturity_warnings
from dv_assets.defs.factory import build_definitions, shared_sensors
from dv_assets.defs.sources import DeltaSource
from dv_assets.mirror.collector import collector_paused
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.table_spec import check_tables_fit

# The folder holding the dv_assets package: pyproject.toml's in a checkout, site-packages when installed
# (`{{ context.project_root }}` in defs.yaml).
PROJECT_ROOT = Path(dv_assets.defs.__file__).resolve().parents[2]


def shared_settings(
    settings: MirrorSettings, mirrors: Sequence[tuple[DeltaSource, CatalogConfig]], where: str
) -> MirrorSettings:
    """`settings` over the tables' one catalog (refused by name when they do not share one)."""
    catalog = check_tables_fit(mirrors, where)
    return settings if catalog is None or catalog == settings.catalog else settings.with_catalog(catalog)


def project_definitions(
    settings: MirrorSettings, defs_module: ModuleType = dv_assets.defs, project_root: Path = PROJECT_ROOT
) -> dg.Definitions:
    """The dg defs folder's definitions, the mirror components checked together first (names, Iceberg
    tables, one catalog), so a conflict is refused by name rather than by a merge error; then the code
    location's two sensors over all its mirror components' tables (factory.py)."""
    tree = dg.ComponentTree.from_module(defs_module=defs_module, project_root=project_root)
    mirrors = tree.get_all_components(of_type=DeltaMirrorComponent)
    defs_folder = Path(str(defs_module.__file__)).parent
    settings = shared_settings(
        settings,
        [(m.source(defs_folder), m.catalog_config(settings.catalog)) for m in mirrors],
        f"{defs_folder} (defs.yaml files)",
    )
    for mirror in mirrors:
        mirror.use_settings(settings)
    built = tree.build_defs()
    # The code location's two sensors over all its tables, targeting the jobs as the tree holds them.
    jobs = {job.name: job for job in built.jobs or []}
    sensors = shared_sensors([m.table for m in mirrors], settings.catalog, jobs)
    return dg.Definitions.merge(built, dg.Definitions(sensors=sensors)) if sensors else built


def file_definitions(settings: MirrorSettings, path: Path) -> dg.Definitions:
    mirrors = load_mirrors_file(path, settings.catalog)
    settings = shared_settings(settings, mirrors, str(path))
    return build_definitions([source for source, _ in mirrors], settings)


def load_definitions(settings: MirrorSettings | None = None) -> dg.Definitions:
    """The code location's definitions (also what the demo and `dv_assets.ci_checks` run), over
    `settings` or the environment's, resolved here once."""
    if settings is None:
        settings = MirrorSettings.resolve()
    sources_file = settings.sources_file
    if settings.sources_named and not sources_file.is_file():
        # A typo must not deploy the packaged tables: the load fails, naming what was asked.
        raise TablesFileError(
            "no such file (named by DVMIRROR_SOURCES; unset it for the packaged tables)",
            path=sources_file,
            kind="tables file",
        )
    # Tens of thousands of Dagster objects a table, few of them garbage: the collector's passes over
    # them were a quarter of the build (issue 35: 3.3 s of CPU at 300 tables, 2.4 s paused). Every job
    # is resolved here too, under the pause, as the code server would next (cached on `defs`).
    with collector_paused():
        defs = (
            file_definitions(settings, sources_file)
            if sources_file.is_file()
            else project_definitions(settings)
        )
        defs.get_repository_def().load_all_definitions()
    return defs


@dg.definitions
def defs() -> dg.Definitions:
    silence_dagster_maturity_warnings()  # again: a loader may have reset the filters since the import
    return load_definitions()
