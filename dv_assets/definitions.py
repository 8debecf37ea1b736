"""The code location: `defs`, built from the sources file (`sources.yaml` in the working directory, or
$DVMIRROR_SOURCES) and the Iceberg catalog of the mirror's settings ($DVMIRROR_CATALOG_URI /
$DVMIRROR_WAREHOUSE, default ./.dvmirror/); see `dv_assets.mirror.settings`.

Loaded by `dagster dev -w workspace.yaml` (`make ui`) and by dagster_cloud.yaml as a code location.
"""

from __future__ import annotations

import dagster as dg

from dv_assets.defs.factory import build_definitions
from dv_assets.defs.sources import load_sources
from dv_assets.mirror.settings import MirrorSettings

_settings = MirrorSettings.resolve()
defs: dg.Definitions = build_definitions(load_sources(_settings.sources_file), _settings.catalog)
