"""Dagster's Preview, Beta and Supersession warnings that the project's own use of Dagster triggers,
silenced in every process that loads the code location (`dg dev`/`make ui`'s code server, the daemon's
run workers, `dg check defs`, the demo, `dv_assets.ci_checks`).

They say an API may change in a minor release; requirements.lock pins Dagster, and the test suite runs
every definition at that pin, so on a console they are only noise (41 lines on `make ui` before this).
What triggers them, all at definition time:

* PreviewWarning: partitioned asset checks (`partitions_def` on an `AssetCheckSpec`: one check result per
  Delta version), the defs folder's loader (`load_definitions_from_module(s)`), dagster-pyspark's
  `SparkDeclarativePipelineScaffolder` (registered with the component types dg lists);
* BetaWarning: `backfill_policy` (one run for a range of versions), components' code references
  (`LocalFileCodeReference`, `CodeReferencesMetadataValue`), sensor `owners`, `execution_type`;
* SupersessionWarning: none today; silenced with them, so that a release within the pinned range that
  supersedes an API the project uses does not print on every start-up.

Exactly these three classes, by category: Dagster's DeprecationWarnings and every other warning still
show. Called at import of `dv_assets.components` (the dg registry module, imported first by every loader
of the code location) and of `dv_assets.definitions`.
"""

from __future__ import annotations

import warnings

import dagster as dg

SILENCED: tuple[type[Warning], ...] = (dg.PreviewWarning, dg.BetaWarning, dg.SupersessionWarning)


def silence_dagster_maturity_warnings() -> None:
    for category in SILENCED:
        warnings.filterwarnings("ignore", category=category)
