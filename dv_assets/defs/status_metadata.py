"""A mirror's `MirrorStatus` as Dagster metadata: the lag figures (`dvmirror/lag_versions`,
`dvmirror/lag_seconds`: numbers, so the UI plots them over time) recorded on every materialization of
`iceberg/<source>` and on every sensor tick that finds the mirror behind, and the current-state figures
the asset's overview shows; and the Delta versions a mirror still holds, as ranges (the cleanup job's
`retained_delta_versions`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from dv_assets.mirror import MirrorStatus

LAG_VERSIONS = "dvmirror/lag_versions"
LAG_SECONDS = "dvmirror/lag_seconds"
RETAINED_VERSIONS = "retained_delta_versions"


def lag_metadata(status: MirrorStatus) -> dict[str, dg.MetadataValue]:
    """Versions behind Delta's latest, and seconds the oldest missing commit has waited (0 when up to
    date; omitted when that commit's time is unknown)."""
    metadata: dict[str, dg.MetadataValue] = {
        LAG_VERSIONS: dg.MetadataValue.int(status.lag_versions),
        "delta_latest_version": dg.MetadataValue.int(status.delta_latest_version),
    }
    if status.lag_seconds is not None:
        metadata[LAG_SECONDS] = dg.MetadataValue.float(round(status.lag_seconds, 3))
    return metadata


def current_state_metadata(status: MirrorStatus) -> dict[str, dg.MetadataValue]:
    """What the mirror shows now: the mirrored Delta version, its rows and live DVs, the snapshot, the
    metadata file a catalog-less reader starts from, and the lag."""
    metadata: dict[str, dg.MetadataValue] = {}
    if status.mirrored_version is not None:
        metadata["mirrored_delta_version"] = dg.MetadataValue.int(status.mirrored_version)
    if status.snapshot_id is not None:
        metadata["current_snapshot_id"] = dg.MetadataValue.int(status.snapshot_id)
    if status.live_rows is not None:
        metadata["live_rows"] = dg.MetadataValue.int(status.live_rows)
    if status.live_data_files is not None:
        metadata["live_data_files"] = dg.MetadataValue.int(status.live_data_files)
    if status.live_delete_files is not None:
        # v3: one delete-file entry per DV; v2: Parquet position-delete files.
        name = "live_dvs" if status.format_version == 3 else "live_delete_files"
        metadata[name] = dg.MetadataValue.int(status.live_delete_files)
    if status.first_readable_version is not None:
        # The mirror starts there: its earlier versions are no longer readable in Delta (log or VACUUM).
        metadata["first_readable_delta_version"] = dg.MetadataValue.int(status.first_readable_version)
    if status.metadata_location is not None:
        metadata["metadata_location"] = dg.MetadataValue.path(status.metadata_location)
    return metadata | lag_metadata(status)


def version_ranges(versions: Iterable[int]) -> str:
    """Delta versions as ascending ranges: `0..3, 5, 7..9` (compact for a long retained history)."""
    spans: list[list[int]] = []
    for v in sorted(set(versions)):
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in spans) or "none"
