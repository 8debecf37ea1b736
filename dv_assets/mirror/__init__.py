"""dv-mirror's engine: Delta log → plan of changes → Iceberg commit, with no Dagster in it.

Usable from a plain Python program or a Spark job, each name imported from the module that defines it:

```python
from dv_assets.mirror.settings import MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.sync import sync_table

settings = MirrorSettings.resolve(catalog_properties={"type": "rest", "uri": "http://127.0.0.1:8181"})
result = sync_table(get_or_create_spark(settings), "/data/delta/events", "ns.events")
```

This package defines nothing itself: the platform above it (`dv_assets.defs`, `dv_assets.components`,
`resources`, `dv_assets.definitions`, `dv_assets.ci_checks`) imports the engine's modules by name, and
nothing in the engine imports the platform or Dagster (tests/test_import_graph.py holds both).
"""
