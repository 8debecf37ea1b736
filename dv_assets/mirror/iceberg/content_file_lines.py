"""The one line format content files cross to Iceberg Java in (`ContentFileBatch.stage` and
`.stageDataManifests`, jvm/src): pure text, staged in a local file by `iceberg/java.py`.

Each line is `<action> TAB <content file>`, the action one of `add-data`, `remove-data`, `add-delete`,
`remove-delete`. The content file is, in general, Iceberg's own `ContentFileParser` JSON (it starts with
`{`), so Iceberg builds the file exactly as from a single one. A deletion vector, the one kind a version
may hold 100,000 of with only a few fields each, goes in a short form instead:

    puffin TAB <spec id> TAB <file size> TAB <Puffin file path>
    <action> TAB <content offset> TAB <content size> TAB <cardinality> TAB <partition JSON> TAB <data file>

the `puffin` line naming the Puffin file of the DV lines after it; the paths come last, so they may hold
tabs. A DV the short form cannot carry (metrics, a line break in a path) goes as JSON: the fallback.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from dv_assets.mirror.iceberg.content_files import NO_METRICS, PUFFIN, DataFile, DeleteFile, partition_to_json
from dv_assets.mirror.iceberg.mirror_table import CommitRequest

ADD_DATA = "add-data"
REMOVE_DATA = "remove-data"
ADD_DELETE = "add-delete"
REMOVE_DELETE = "remove-delete"
PUFFIN_LINE = "puffin"

_dumps = json.JSONEncoder(separators=(",", ":")).encode


def write_content_files(
    out: TextIO, request: CommitRequest, *, data_files: bool = True, short_dvs: bool = True
) -> int:
    """Every content file of `request` as lines to `out`, removals first; without the added data files
    unless `data_files` (they go to `write_data_files` apart), every DV as JSON unless `short_dvs` (the
    tests compare the two). Returns how many content files (`puffin` lines are not files)."""
    count = _write_delete_files(out, REMOVE_DELETE, request.remove_delete_files, short_dvs)
    count += _write_json(out, REMOVE_DATA, request.remove_data_files)
    if data_files:
        count += write_data_files(out, request.add_data_files)
    return count + _write_delete_files(out, ADD_DELETE, request.add_delete_files, short_dvs)


@contextlib.contextmanager
def lines_file() -> Iterator[Path]:
    """A private local file for content-file lines between this process and its JVM (same machine)."""
    with tempfile.TemporaryDirectory(prefix="dvmirror-") as folder:
        yield Path(folder) / "content-files.jsonl"


@dataclass(frozen=True)
class SpooledDataFiles(Collection[DataFile]):
    """Data files already written as `add-data` lines to a local file, `count` of them: a new mirror's
    first version, whose ten million entries are written as its files are read (`sync.py`) and go to
    the JVM as that file. They are not held, so not iterable here."""

    path: Path
    count: int

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[DataFile]:
        raise TypeError("spooled data files are lines in a file, not held: see SpooledDataFiles.path")

    def __contains__(self, item: object) -> bool:
        raise TypeError("spooled data files are lines in a file, not held: see SpooledDataFiles.path")


def write_data_files(out: TextIO, files: Collection[DataFile]) -> int:
    """`add-data` lines, a million in a first version: `DataFile.json_line`, not a dict encoded each."""
    if isinstance(files, SpooledDataFiles):
        with files.path.open(encoding="utf-8") as spooled:
            shutil.copyfileobj(spooled, out, 1 << 20)
        return len(files)
    for data_file in files:
        out.write(f"{ADD_DATA}\t{data_file.json_line()}\n")
    return len(files)


def _write_json(out: TextIO, action: str, files: Collection[DataFile] | Collection[DeleteFile]) -> int:
    for content_file in files:
        out.write(f"{action}\t{_dumps(content_file.to_json())}\n")
    return len(files)


def _write_delete_files(out: TextIO, action: str, files: Collection[DeleteFile], short_dvs: bool) -> int:
    """The DVs in the short form, grouped by Puffin file (each named once), then the others as JSON.
    A version's DVs share a few Puffin files and partitions: each partition's JSON is made once."""
    dvs, others = split_short_dvs(files) if short_dvs else ([], list(files))
    by_puffin: dict[tuple[int, int, str], list[DeleteFile]] = {}
    for dv in dvs:
        by_puffin.setdefault((dv.spec_id, dv.file_size_in_bytes, dv.path), []).append(dv)
    partition_json: dict[Any, str] = {(): "[]"}
    for (spec_id, size, puffin_path), in_puffin in by_puffin.items():
        out.write(f"{PUFFIN_LINE}\t{spec_id}\t{size}\t{puffin_path}\n")
        lines = []
        for dv in in_puffin:
            partition = dv.partition
            key = partition if isinstance(partition, tuple) else json.dumps(partition, sort_keys=True)
            text = partition_json.get(key)
            if text is None:
                text = partition_json[key] = _dumps(partition_to_json(partition))
            lines.append(
                f"{action}\t{dv.content_offset}\t{dv.content_size_in_bytes}\t{dv.record_count}"
                f"\t{text}\t{dv.referenced_data_file}\n"
            )
        out.writelines(lines)
    return len(dvs) + _write_json(out, action, others)


def split_short_dvs(files: Collection[DeleteFile]) -> tuple[list[DeleteFile], list[DeleteFile]]:
    """(the DVs the short form carries, the other delete files). A DV carries no metrics; its line ends
    at a line break, so a path holding one goes as JSON."""
    dvs: list[DeleteFile] = []
    others: list[DeleteFile] = []
    for delete_file in files:
        # Run once per DV of a version (100,000 in some): `is` before the fields' comparison, `in` before
        # a regular expression.
        metrics, path, data_file = delete_file.metrics, delete_file.path, delete_file.referenced_data_file
        short = (
            delete_file.file_format == PUFFIN
            and (metrics is NO_METRICS or metrics == NO_METRICS)
            and delete_file.content_offset is not None
            and "\n" not in path
            and "\r" not in path
            and "\n" not in data_file
            and "\r" not in data_file
        )
        (dvs if short else others).append(delete_file)
    return dvs, others
