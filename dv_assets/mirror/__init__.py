"""dv-mirror's engine: Delta log → plan of changes → Iceberg commit, with no Dagster in it.

Usable from a plain Python program or a Spark job:

```python
from dv_assets.mirror import MirrorSettings, get_or_create_spark, sync_table

settings = MirrorSettings.resolve(catalog_properties={"type": "rest", "uri": "http://127.0.0.1:8181"})
result = sync_table(get_or_create_spark(settings), "/data/delta/events", "ns.events")
```

The public surface is re-exported here; the Dagster platform (`dv_assets.defs`) uses nothing else but
these names and the typed values they return.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "MirrorSettings": "dv_assets.mirror.settings",
    "CatalogConfig": "dv_assets.mirror.settings",
    "get_or_create_spark": "dv_assets.mirror.spark",
    "sync_table": "dv_assets.mirror.sync",
    "SyncResult": "dv_assets.mirror.sync",
    "VersionResult": "dv_assets.mirror.sync",
    "MirrorInputError": "dv_assets.mirror.errors",
    "FileIO": "dv_assets.mirror.io",
    "IcebergJava": "dv_assets.mirror.iceberg.java",
    "expire_and_reclaim": "dv_assets.mirror.iceberg.maintenance",
    "Retention": "dv_assets.mirror.iceberg.maintenance",
    "DeltaTable": "dv_assets.mirror.delta.replay",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    # Lazy, so that `dvmirror --help` and the Delta-only sensors do not import pyspark.
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
