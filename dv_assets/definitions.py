"""The code location: `defs`, built from the sources file (sources.yaml or $DVMIRROR_SOURCES) and the
Iceberg catalog from the environment ($DVMIRROR_CATALOG_URI / $DVMIRROR_WAREHOUSE, default .dvmirror/).

Loaded by `dagster dev -w workspace.yaml` (`make ui`) and by dagster_cloud.yaml as a code location.
"""

from __future__ import annotations

import dagster as dg

from dv_assets.assets.factory import build_definitions
from dv_assets.config import catalog_location, load_sources

defs: dg.Definitions = build_definitions(load_sources(), catalog_location())
