"""The Dagster resource for Spark with Delta and Iceberg: dagster-pyspark's lazy resource, configured
with the mirror's settings.

`spark_config` works as for any dagster-pyspark resource (it is applied over the mirror's own settings,
e.g. `{"spark.master": "spark://host:7077", "spark.executor.memory": "4g"}`); the mirror's settings ride
in their own fields. The code location builds the resource from the settings it resolved once
(`for_settings`: every field set, nothing read again); a field left unset falls back to the environment
(`dv_assets.mirror.MirrorSettings`), except that explicit `catalog_properties` are the whole catalog,
never merged with DVMIRROR_CONFIG's or DVMIRROR_WAREHOUSE underneath.
"""

from __future__ import annotations

from typing import Any

from dagster_pyspark import LazyPySparkResource
from dagster_spark.utils import flatten_dict
from pydantic import Field, PrivateAttr

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
        "Iceberg defines them, used as given (`warehouse` below fills a missing warehouse); default: the "
        "sqlite catalog below",
    )
    catalog_uri: str | None = Field(
        default=None, description="sqlite:///PATH/catalog.db (default: DVMIRROR_CATALOG_URI, ./.dvmirror)"
    )
    warehouse: str | None = Field(
        default=None, description="Iceberg warehouse folder or URI (DVMIRROR_WAREHOUSE)"
    )
    jars_dir: str | None = Field(
        default=None,
        description="Folder of the JVM jars (DVMIRROR_JARS, ./.jars); none: the packaged helper jar and "
        "Maven Central through Ivy",
    )
    spark_packages: bool | None = Field(
        default=None, description="Maven packages instead of the jars folder (DVMIRROR_SPARK_PACKAGES=1)"
    )
    spark_master: str | None = Field(
        default=None, description="Spark master (DVMIRROR_SPARK_MASTER, local[2]); spark_config's wins"
    )
    driver_memory: str | None = Field(
        default=None, description="Spark driver memory (DVMIRROR_SPARK_DRIVER_MEMORY, 3g)"
    )
    s3: bool | None = Field(
        default=None, description="S3 jars in Spark even when the catalog does not use S3 (DVMIRROR_S3=1)"
    )
    executor_dvs: str | None = Field(
        default=None,
        description="DVs of a version from which they are converted in Spark tasks on a cluster master "
        "(never on a local one), or `off` (DVMIRROR_EXECUTOR_DVS, 50000)",
    )
    _settings: MirrorSettings | None = PrivateAttr(default=None)

    @classmethod
    def for_settings(cls, settings: MirrorSettings, **fields: Any) -> IcebergSparkResource:
        """The resource holding `settings` (resolved once by the code location) as its config."""
        return cls(
            catalog_properties=dict(settings.catalog.properties),
            jars_dir=None if settings.jars_dir is None else str(settings.jars_dir),
            spark_packages=settings.spark_packages,
            spark_master=settings.spark_master,
            driver_memory=settings.driver_memory,
            s3=settings.s3_requested,
            executor_dvs=settings.executor_dvs,
            **fields,
        )

    @property
    def settings(self) -> MirrorSettings:
        """The mirror's settings from the fields, resolved once per resource object."""
        if self._settings is None:
            self._settings = MirrorSettings.resolve(
                catalog=self._explicit_catalog(),
                catalog_uri=self.catalog_uri,
                warehouse=self.warehouse,
                jars_dir=self.jars_dir,
                spark_packages=self.spark_packages,
                spark_master=self.spark_master,
                driver_memory=self.driver_memory,
                s3=bool(self.s3),
                executor_dvs=self.executor_dvs,
            )
        return self._settings

    def _explicit_catalog(self) -> CatalogConfig | None:
        """`catalog_properties` as the whole catalog (the `warehouse` field filling a missing warehouse):
        nothing from the environment or a configuration file is merged underneath."""
        if not self.catalog_properties:
            return None
        if self.catalog_uri:
            raise ValueError("give the catalog as catalog_uri or as catalog_properties, not both")
        properties = dict(self.catalog_properties)
        if self.warehouse and "warehouse" not in properties:
            properties["warehouse"] = self.warehouse
        return CatalogConfig(properties)

    def _init_session(self) -> None:
        if self._spark_session is None:
            # Nested or dotted keys, as dagster-pyspark accepts them.
            overrides = dict(flatten_dict(self.spark_config))
            self._spark_session = get_or_create_spark(self.settings, overrides)
