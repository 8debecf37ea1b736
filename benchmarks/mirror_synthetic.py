"""A bigger synthetic benchmark: a Delta table with many files and many DV-only versions, mirrored.

Run by hand (never by pytest):

    .venv/bin/python benchmarks/mirror_synthetic.py [--files 500] [--rows 1000] [--versions 100]
        [--touched 20] [--format-version 3|2]

The Delta table is written directly (pyarrow Parquet + JSON commits + DV files laid out as Delta's
PROTOCOL.md says), not by Spark, so that building it takes seconds: version 0 adds `--files` files of
`--rows` rows; each later version gives `--touched` files a new, larger DV (one DV file per version, as
Delta writes them), and every tenth version also appends a file. Spark start-up is excluded.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dv_assets.mirror.dv.codec import encode_blob, z85_encode
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import get_or_create_spark
from dv_assets.mirror.sync import sync_table

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def _add(path: str, size: int, rows: int, dv: dict | None) -> dict:
    add = {
        "path": path,
        "partitionValues": {},
        "size": size,
        "modificationTime": 0,
        "dataChange": True,
        "stats": json.dumps({"numRecords": rows}),
    }
    if dv is not None:
        add["deletionVector"] = dv
    return add


def build(root: Path, files: int, rows: int, versions: int, touched: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    log = root / "_delta_log"
    log.mkdir(parents=True)
    template = root / "template.parquet"
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64())}), template)
    content = template.read_bytes()
    template.unlink()

    def new_file() -> str:
        name = f"part-{uuid.uuid4()}.parquet"
        (root / name).write_bytes(content)
        return name

    live: dict[str, tuple[set[int], dict | None]] = {}
    actions: list[dict] = [
        {"commitInfo": {"timestamp": 0, "operation": "WRITE"}},
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        },
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": [],
                "configuration": {"delta.enableDeletionVectors": "true"},
                "createdTime": 0,
            }
        },
    ]
    for _ in range(files):
        name = new_file()
        live[name] = (set(), None)
        actions.append({"add": _add(name, len(content), rows, None)})
    _write_commit(log, 0, actions)
    for version in range(1, versions + 1):
        actions = [{"commitInfo": {"timestamp": version, "operation": "DELETE"}}]
        dv_uuid = uuid.uuid4()
        dv_bytes = bytearray(b"\x01")
        for name in rng.sample(sorted(live), min(touched, len(live))):
            deleted, old_dv = live[name]
            deleted = deleted | set(rng.sample(range(rows), max(1, rows // 100)))
            blob = encode_blob(sorted(deleted))
            dv = {
                "storageType": "u",
                "pathOrInlineDv": z85_encode(dv_uuid.bytes),
                "offset": len(dv_bytes),
                "sizeInBytes": len(blob) - 8,
                "cardinality": len(deleted),
            }
            dv_bytes += blob
            remove = {"path": name, "dataChange": True, "partitionValues": {}, "size": len(content)}
            if old_dv is not None:
                remove["deletionVector"] = old_dv
            actions.append({"remove": remove})
            actions.append({"add": _add(name, len(content), rows, dv)})
            live[name] = (deleted, dv)
        (root / f"deletion_vector_{dv_uuid}.bin").write_bytes(bytes(dv_bytes))
        if version % 10 == 0:
            name = new_file()
            live[name] = (set(), None)
            actions.append({"add": _add(name, len(content), rows, None)})
        _write_commit(log, version, actions)


def _write_commit(log: Path, version: int, actions: list[dict]) -> None:
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


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
