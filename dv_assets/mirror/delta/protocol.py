"""Which Delta reader features the mirror can reproduce exactly, and refusing the others by name.

Writer-only features do not change what a reader sees, so only reader features are checked.
Legacy protocols name no features: reader version 1 needs none, 2 means column mapping.
"""

from __future__ import annotations

from dv_assets.mirror.delta.actions import Protocol
from dv_assets.mirror.errors import UnsupportedFeatureError

SUPPORTED_READER_FEATURES: frozenset[str] = frozenset(
    {"deletionVectors", "columnMapping", "timestampNtz", "v2Checkpoint"}
)
# Reader version 3 is the table-features protocol: the features are listed explicitly.
TABLE_FEATURES_READER_VERSION = 3
LEGACY_READER_FEATURES: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({"columnMapping"}),
}


def reader_features(protocol: Protocol) -> frozenset[str]:
    """The reader features a protocol requires, legacy versions translated to feature names."""
    if protocol.min_reader_version in LEGACY_READER_FEATURES:
        return LEGACY_READER_FEATURES[protocol.min_reader_version]
    return protocol.reader_features or frozenset()


def refused_reader_features(protocol: Protocol) -> list[str]:
    """Reader features (or an unknown reader version) that the mirror cannot read, sorted."""
    if protocol.min_reader_version > TABLE_FEATURES_READER_VERSION or protocol.min_reader_version < 1:
        return [f"minReaderVersion={protocol.min_reader_version}"]
    return sorted(reader_features(protocol) - SUPPORTED_READER_FEATURES)


def check_protocol(protocol: Protocol, *, table: str, version: int) -> None:
    """Raise UnsupportedFeatureError naming every refused reader feature of `protocol`."""
    refused = refused_reader_features(protocol)
    if refused:
        raise UnsupportedFeatureError(
            f"unsupported Delta reader feature(s): {', '.join(refused)} "
            f"(supported: {', '.join(sorted(SUPPORTED_READER_FEATURES))})",
            table=table,
            version=version,
        )
