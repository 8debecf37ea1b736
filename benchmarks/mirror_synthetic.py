"""A bigger synthetic benchmark: a Delta table with many files and many DV-only versions, mirrored.

Run by hand (never by pytest):

    .venv/bin/python benchmarks/mirror_synthetic.py [--files 500] [--rows 1000] [--versions 100]
        [--touched 20] [--format-version 3|2]

The Delta table is written directly (pyarrow Parquet + JSON commits + DV files laid out as Delta's
PROTOCOL.md says: `SyntheticTable` of testkit/synthetic.py), not by Spark, so that building it
takes seconds: version 0 adds `--files` files of `--rows` rows; each later version gives `--touched` files
a new, larger DV (one DV file per version, as Delta writes them), and every tenth version also appends a
file. Spark start-up is excluded.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: testkit, tests.helpers

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.sync import sync_table
from testkit.synthetic import SyntheticTable


def build(root: Path, files: int, rows: int, versions: int, touched: int, seed: int = 7) -> None:
    """Version 0 adds `files` files of `rows` rows; each later version gives `touched` of them a new DV
    holding 1% more of their rows (one DV file per version), every tenth also appends a file."""
    rng = random.Random(seed)
    table = SyntheticTable(root, rows_per_file=rows)
    table.create(files)
    deleted: dict[str, set[int]] = {}
    for version in range(1, versions + 1):
        names = rng.sample(sorted(table.files), min(touched, len(table.files)))
        for name in names:
            deleted[name] = deleted.get(name, set()) | set(rng.sample(range(rows), max(1, rows // 100)))
        table.delete(names, lambda i, names=names: deleted[names[i]], append=1 if version % 10 == 0 else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--touched", type=int, default=20)
    parser.add_argument("--format-version", type=int, choices=(2, 3), default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dvmirror-synthetic-") as tmp:
        root = Path(tmp) / "delta"
        began = time.monotonic()
        build(root, args.files, args.rows, args.versions, args.touched)
        print(f"built the Delta table ({args.versions + 1} versions) in {time.monotonic() - began:.1f} s")
        spark = get_or_create_spark(
            MirrorSettings.resolve(catalog=CatalogConfig.under(Path(tmp) / "iceberg"))
        )
        began = time.monotonic()
        result = sync_table(spark, root, "bench.synthetic", format_version=args.format_version)
        seconds = time.monotonic() - began
        dvs = sum(v.dvs_written for v in result.versions)
        print(
            f"mirrored {len(result.versions)} versions ({args.files} files, {dvs} DVs written) as format "
            f"{args.format_version} in {seconds:.2f} s "
            f"({1000 * seconds / len(result.versions):.0f} ms/version)"
        )
        spark.stop()


if __name__ == "__main__":
    main()
