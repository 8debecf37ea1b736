"""Dagster resources of dv-mirror."""

from resources.spark import CatalogLocation, IcebergSparkResource, get_or_create_spark, spark_config

__all__ = ["CatalogLocation", "IcebergSparkResource", "get_or_create_spark", "spark_config"]
