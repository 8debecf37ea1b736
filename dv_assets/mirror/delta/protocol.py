"""Which Delta reader features the mirror can reproduce exactly, and refusing the others by name.

Writer-only features do not change what a reader sees, so only reader features are checked. Delta's
PROTOCOL.md defines nine reader(-writer) features; each is either supported here or refused with the
reason (`REFUSED_READER_FEATURES`), and a feature this module does not know is refused as unknown.
`vacuumProtocolCheck` only makes VACUUM check the protocol; the mirror never vacuums a Delta table, and
what a reader sees is unchanged.
Legacy protocols name no features: reader version 1 needs none, 2 means column mapping. A column mapping
mode the protocol leaves without effect is refused where readers could read other columns
(`check_column_mapping`).
"""

from __future__ import annotations

from dv_assets.mirror.delta import column_mapping
from dv_assets.mirror.delta.actions import Metadata, Protocol
from dv_assets.mirror.errors import MirrorInputError, UnsupportedFeatureError

SUPPORTED_READER_FEATURES: frozenset[str] = frozenset(
    {
        "deletionVectors",
        "columnMapping",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        # A v3 mirror's `variant` column (iceberg/schema.py; format 2 refuses it by name), read exactly
        # by Iceberg Java 1.12 and DuckDB 1.5.5 (tests/delta/test_protocol_features.py); pyiceberg 0.12 cannot
        # parse such a schema, so dv-mirror reads the mirror's metadata without it (pyiceberg_reader.py).
        "variantType",
        "variantType-preview",
        # Each widening becomes an Iceberg type promotion, or is refused (iceberg/type_promotion.py).
        "typeWidening",
        "typeWidening-preview",
    }
)
_CATALOG_MANAGED = (
    "a catalog-managed table keeps its newest commits in its catalog, not in _delta_log: the file "
    "system does not show them, so the mirror cannot know the table's versions"
)
# Delta Spark 4.4 shreds `[1, 2.5]` into a decimal(2,1) `typed_value`: Iceberg Java reads the value back
# as Delta Spark does (`[1,2.5]`), DuckDB 1.5.5 as `[1.0, 2.5]` (tests/delta/test_protocol_features.py).
_SHREDDED = (
    "shredded VARIANT files are not mirrored: DuckDB 1.5.5 reads some shredded values differently from "
    "Delta Spark (an array [1, 2.5] that Delta Spark shreds as decimals reads as [1.0, 2.5])"
)
# Reader features Delta defines that the mirror refuses, with the reason (`-preview`: Delta Spark's
# names before the feature was final, still found in tables it wrote).
REFUSED_READER_FEATURES: dict[str, str] = {
    "catalogManaged": _CATALOG_MANAGED,
    "catalogOwned-preview": _CATALOG_MANAGED,
    "variantShredding": _SHREDDED,
    "variantShredding-preview": _SHREDDED,
}
UNKNOWN_FEATURE = "unknown to dv-mirror"
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


def refusal_reason(feature: str) -> str:
    """Why the mirror refuses a reader feature (an unknown one: that it is unknown)."""
    return REFUSED_READER_FEATURES.get(feature, UNKNOWN_FEATURE)


def check_protocol(protocol: Protocol, *, table: str, version: int) -> None:
    """Raise UnsupportedFeatureError naming every refused reader feature of `protocol`, each with why."""
    refused = refused_reader_features(protocol)
    if refused:
        named = [f if f.startswith("minReaderVersion") else f"{f} ({refusal_reason(f)})" for f in refused]
        raise UnsupportedFeatureError(
            f"unsupported Delta reader feature(s): {', '.join(named)} "
            f"(supported: {', '.join(sorted(SUPPORTED_READER_FEATURES))})",
            table=table,
            version=version,
        )


def check_column_mapping(protocol: Protocol, metadata: Metadata, *, table: str, version: int) -> None:
    """Refuse a column mapping mode the protocol leaves without effect when the schema says the data files
    were written under it (column mapping ids or physical names): delta-kernel-rs then ignores the mode
    and reads columns by logical name, a reader that takes the mode from the configuration alone reads
    them by physical name or id, and the mirror cannot tell which columns the files hold. Without those
    annotations every reading is by logical name, and so is the mirror's."""
    configured = metadata.configuration.get(column_mapping.MODE_KEY)
    if configured in (None, "none") or protocol.supports_column_mapping:
        return
    try:
        annotated = column_mapping.has_annotations(metadata.schema)
    except MirrorInputError as exc:
        raise exc.at(table=table, version=version) from exc
    if annotated:
        features = protocol.writer_features
        shown = "" if features is None else f", writerFeatures {sorted(features)}"
        raise UnsupportedFeatureError(
            f"{column_mapping.MODE_KEY} is {configured!r} but the protocol (minReaderVersion "
            f"{protocol.min_reader_version}{shown}) does not support column mapping, so delta-kernel-rs "
            "reads the columns by logical name, while the schema's column mapping ids / physical names say "
            "the files were written under it: which columns the files hold is ambiguous; refused",
            table=table,
            version=version,
        )
