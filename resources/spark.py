"""The Dagster resource for Spark with Delta and Iceberg: dagster-pyspark's lazy resource, configured
with the mirror's settings.

`spark_config` works as for any dagster-pyspark resource (it is applied over the mirror's own settings,
e.g. `{"spark.master": "spark://host:7077", "spark.executor.memory": "4g"}`); the Iceberg catalog (one
map of Iceberg's catalog properties, or the sqlite shorthand) and the jars folder ride in their own
fields, defaulting to the environment (`dv_assets.mirror.settings`).
"""

from __future__ import annotations

from typing import Any

from dagster_pyspark import LazyPySparkResource
from dagster_spark.utils import flatten_dict
from pydantic import Field

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark


class IcebergSparkResource(LazyPySparkResource):
    """A lazily started SparkSession whose catalog `dvmirror` is the configured Iceberg catalog.

    A process has one SparkSession: a running one (the tests', an earlier step's) is reused when its
    catalog is the configured one, and refused otherwise rather than written to.
    """

    spark_config: dict[str, Any] = Field(
        default_factory=dict, description="Spark settings applied over the mirror's own (dagster-pyspark's)"
    )
    catalog_properties: dict[str, str] | None = Field(
        default=None,
        description="Iceberg catalog properties (type or catalog-impl, uri, warehouse, io-impl, s3.*), as "
        "Iceberg defines them; default: the sqlite catalog below",
    )
    catalog_uri: str | None = Field(
        default=None, description="sqlite:///PATH/catalog.db (default: DVMIRROR_CATALOG_URI, ./.dvmirror)"
    )
    warehouse: str | None = Field(
        default=None, description="Iceberg warehouse folder or URI (DVMIRROR_WAREHOUSE)"
    )
    jars_dir: str | None = Field(default=None, description="Folder of the JVM jars (DVMIRROR_JARS, ./.jars)")

    @classmethod
    def for_catalog(cls, catalog: CatalogConfig, **fields: Any) -> IcebergSparkResource:
        return cls(catalog_properties=dict(catalog.properties), **fields)

    @property
    def settings(self) -> MirrorSettings:
        return MirrorSettings.resolve(
            catalog_properties=self.catalog_properties,
            catalog_uri=self.catalog_uri,
            warehouse=self.warehouse,
            jars_dir=self.jars_dir,
        )

    def _init_session(self) -> None:
        if self._spark_session is None:
            # Nested or dotted keys, as dagster-pyspark accepts them.
            overrides = dict(flatten_dict(self.spark_config))
            self._spark_session = get_or_create_spark(self.settings, overrides)
