"""Dagster assets of the mirror: `delta/<source>` (Delta commits) and `iceberg/<source>` (the mirror),
built per configured source by `dv_assets.assets.factory.build_source`."""
