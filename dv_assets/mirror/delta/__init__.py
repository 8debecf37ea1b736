"""Reading a Delta table's log without Spark: actions, paths, log files, replay, protocol checks."""

from dv_assets.mirror.delta.actions import AddFile, DeletionVectorDescriptor, Metadata, Protocol, RemoveFile
from dv_assets.mirror.delta.paths import resolve_location, table_root_of
from dv_assets.mirror.delta.protocol import SUPPORTED_READER_FEATURES, check_protocol
from dv_assets.mirror.delta.replay import DeltaTable, TableState, VersionChange

__all__ = [
    "SUPPORTED_READER_FEATURES",
    "AddFile",
    "DeletionVectorDescriptor",
    "DeltaTable",
    "Metadata",
    "Protocol",
    "RemoveFile",
    "TableState",
    "VersionChange",
    "check_protocol",
    "resolve_location",
    "table_root_of",
]
