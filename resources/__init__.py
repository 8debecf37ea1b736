"""Dagster resources of dv-mirror (the engine itself lives in `dv_assets.mirror`)."""

from resources.spark import IcebergSparkResource

__all__ = ["IcebergSparkResource"]
