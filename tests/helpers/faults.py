"""Fault injection through the engine's seams, never through its production path.

`python -m tests.helpers.faults crash-before-commit VERSION DELTA_TABLE TABLE CATALOG_URI WAREHOUSE`
mirrors like `dvmirror sync`, with an Iceberg seam whose commit of Delta version VERSION kills the process
(`os._exit`: no cleanup, no exception handler runs) after the delete files are written: how the tests
prove that a crash leaves no half-written commit.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from dv_assets.mirror.iceberg.java import IcebergJava
from dv_assets.mirror.iceberg.mirror_table import CommitOutcome, CommitRequest
from dv_assets.mirror.settings import MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.sync import sync_table

CRASH_EXIT_CODE = 99


class CrashBeforeCommit(IcebergJava):
    def __init__(self, spark: SparkSession, delta_version: int) -> None:
        super().__init__(spark)
        self.delta_version = delta_version

    def commit(self, table_name: str, request: CommitRequest) -> CommitOutcome:
        if request.delta_version == self.delta_version:
            os._exit(CRASH_EXIT_CODE)
        return super().commit(table_name, request)


def main(argv: list[str]) -> int:
    command, version, delta_table, table, catalog_uri, warehouse = argv
    assert command == "crash-before-commit", command
    spark = get_or_create_spark(MirrorSettings.resolve(catalog_uri=catalog_uri, warehouse=warehouse))
    sync_table(spark, delta_table, table, iceberg=CrashBeforeCommit(spark, int(version)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
