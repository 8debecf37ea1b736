"""Time to mirror the 47 versions (0-46) of the shared fixture `basic-dv-with-checkpoint`.

Run by hand (never by pytest):

    .venv/bin/python benchmarks/mirror_fixture.py [--format-version 3|2] [--repeat N]

Spark start-up is excluded; each repeat mirrors into a fresh Iceberg table of a temporary catalog.
The fixture is only read: the mirror references its data files in place and writes into the catalog.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: testkit, tests.helpers

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.sync import sync_table
from tests.helpers.paths import DELTA_FIXTURES

FIXTURE = DELTA_FIXTURES / "basic-dv-with-checkpoint"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--format-version", type=int, choices=(2, 3), default=3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dvmirror-bench-") as tmp:
        started = time.monotonic()
        spark = get_or_create_spark(MirrorSettings.resolve(catalog=CatalogConfig.under(tmp)))
        print(f"spark start-up: {time.monotonic() - started:.1f} s (not counted)")
        for run in range(args.repeat):
            began = time.monotonic()
            result = sync_table(spark, FIXTURE, f"bench.basic_{run}", format_version=args.format_version)
            seconds = time.monotonic() - began
            versions = result.mirrored_versions
            print(
                f"run {run + 1}: mirrored {len(versions)} versions ({versions[0]}-{versions[-1]}) of "
                f"{FIXTURE.name} as format {args.format_version} in {seconds:.2f} s "
                f"({1000 * seconds / len(versions):.0f} ms/version)"
            )
        spark.stop()


if __name__ == "__main__":
    main()
