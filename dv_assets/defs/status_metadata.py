"""A mirror's `MirrorStatus` as Dagster metadata, written for a person reading the asset's page:

* the lag (`dvmirror/lag_versions`, `dvmirror/lag_seconds`: numbers, so the UI plots them over time),
  recorded on every materialization of `iceberg/<source>` and on every sensor tick that finds the mirror
  behind;
* the current state the asset's overview shows: a short `overview` (version, rows, DVs, lag, readable
  versions), the quantities as numbers (`live_rows`, `live_dvs`), identifiers as text
  (`mirrored_delta_version`, `current_snapshot_id`: a plot of a snapshot id is noise), and the rest in
  one collapsed JSON value (`details`).

Only quantities (rows, DVs, files, bytes, seconds, lag) are numeric metadata: the UI's Plots view draws
one chart per numeric key. Everything else a person may want but does not read at a glance goes under
`details` (`merge_metadata` merges the `details` of several parts into one value).

The metadata file the table pointed at when the version was materialized is recorded as
`metadata_location_when_materialized`: the cleanup job rewrites the table's metadata, and records the
new location (`metadata_location`) on an observation of the asset (maintenance.py), so neither claims
to be current after the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import dagster as dg

from dv_assets.mirror.status import version_ranges

if TYPE_CHECKING:
    from dv_assets.mirror.status import MirrorStatus

LAG_VERSIONS = "dvmirror/lag_versions"
LAG_SECONDS = "dvmirror/lag_seconds"
RETAINED_VERSIONS = "retained_delta_versions"
READABLE_VERSIONS = "readable_delta_versions"
DETAILS = "details"
OVERVIEW = "overview"
METADATA_WHEN_MATERIALIZED = "metadata_location_when_materialized"
METADATA_LOCATION = "metadata_location"
TIME_TRAVEL = "dvmirror/time_travel"  # "expired" on an expired version's partition

__all__ = ["version_ranges"]


def details(values: Mapping[str, Any]) -> dict[str, dg.MetadataValue]:
    """`values` (JSON-able) as the one collapsed `details` value (nothing when empty)."""
    return {DETAILS: dg.MetadataValue.json(dict(values))} if values else {}


def merge_metadata(*parts: Mapping[str, Any]) -> dict[str, Any]:
    """The parts merged left to right, their `details` JSON values merged into one."""
    merged: dict[str, Any] = {}
    collected: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if key == DETAILS:
                collected |= value.value if isinstance(value, dg.JsonMetadataValue) else dict(value)
            else:
                merged[key] = value
    return merged | details(collected)


def lag_metadata(status: MirrorStatus) -> dict[str, dg.MetadataValue]:
    """Versions behind Delta's latest, and seconds the oldest missing commit has waited (0 when up to
    date; omitted when that commit's time is unknown); Delta's latest version (an identifier: text)."""
    metadata: dict[str, dg.MetadataValue] = {
        LAG_VERSIONS: dg.MetadataValue.int(status.lag_versions),
        "delta_latest_version": dg.MetadataValue.text(str(status.delta_latest_version)),
    }
    if status.lag_seconds is not None:
        metadata[LAG_SECONDS] = dg.MetadataValue.float(round(status.lag_seconds, 3))
    return metadata


def lag_text(status: MirrorStatus) -> str:
    if status.up_to_date:
        return "up to date"
    waited = "" if status.lag_seconds is None else f", the oldest waiting {status.lag_seconds:.0f} s"
    return f"{status.lag_versions} version(s) behind Delta's latest ({status.delta_latest_version}){waited}"


def overview_markdown(status: MirrorStatus) -> str:
    """The mirror now, in four lines: what the overview should say first."""
    fmt = status.format_version
    deletes = "DVs" if fmt is None or fmt >= 3 else "position-delete files"
    version = status.mirrored_version
    mirrored = "nothing yet" if version is None else f"Delta version **{version}**"
    rows, dvs = _or_unknown(status.live_rows), _or_unknown(status.live_delete_files)
    lines = [
        f"- **Mirrors** {mirrored} of `{status.delta_path}` (snapshot `{status.snapshot_id}`)",
        f"- **Rows** {rows} live, **{deletes}** {dvs}",
        f"- **Lag** {lag_text(status)}",
        f"- **Readable versions** (time travel) {version_ranges(status.readable_versions)}",
    ]
    return "\n".join(lines)


def current_state_metadata(status: MirrorStatus) -> dict[str, Any]:
    """What the mirror shows now: the overview, the mirrored Delta version and snapshot (text), its rows
    and live DVs (numbers), the versions still readable, the metadata file, the lag; the rest as details."""
    metadata: dict[str, Any] = {OVERVIEW: dg.MetadataValue.md(overview_markdown(status))}
    if status.mirrored_version is not None:
        metadata["mirrored_delta_version"] = dg.MetadataValue.text(str(status.mirrored_version))
    if status.snapshot_id is not None:
        metadata["current_snapshot_id"] = dg.MetadataValue.text(str(status.snapshot_id))
    if status.live_rows is not None:
        metadata["live_rows"] = dg.MetadataValue.int(status.live_rows)
    if status.live_delete_files is not None:
        # v3: one delete-file entry per DV; v2: Parquet position-delete files.
        name = "live_dvs" if status.format_version == 3 else "live_delete_files"
        metadata[name] = dg.MetadataValue.int(status.live_delete_files)
    metadata[READABLE_VERSIONS] = dg.MetadataValue.text(version_ranges(status.readable_versions))
    if status.metadata_location is not None:
        # True when recorded; the cleanup job records the location after its rewrite (maintenance.py).
        metadata[METADATA_WHEN_MATERIALIZED] = dg.MetadataValue.path(status.metadata_location)
    more: dict[str, Any] = {
        "format_version": status.format_version,
        "live_data_files": status.live_data_files,
    }
    if status.first_readable_version is not None:
        # The mirror starts there: its earlier versions are no longer readable in Delta (log or VACUUM).
        more["first_readable_delta_version"] = status.first_readable_version
    return merge_metadata(metadata, lag_metadata(status), details(more))


def _or_unknown(value: object) -> str:
    return "unknown" if value is None else str(value)
