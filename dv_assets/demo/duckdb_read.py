"""Reading a mirror with DuckDB, from its metadata file alone (no catalog): the demo's last step, and the
test suite's third Iceberg reader (tests/helpers/readers.py).

DuckDB's `iceberg` and `avro` extensions come from their PyPI packages (`duckdb-extension-iceberg`,
`duckdb-extension-avro`, the dev extras, pinned to DuckDB's own version) and are loaded by file; nothing
is ever installed or downloaded. The connection is locked down so that no query can change that:
no autoinstall or autoload (iceberg's own start-up tries to autoinstall avro when it is not loaded
first), no community extensions, signatures checked (the packaged files must be DuckDB's signed
builds), and an extension folder and repositories under /dev/null, where no folder can be created, so
that even an explicit `INSTALL … FROM core` fails before any request; then the configuration is locked.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path

import duckdb
import pyarrow as pa

# avro first: the iceberg extension reads manifests with it, and would try to install it otherwise.
EXTENSIONS = ("avro", "iceberg")
# A folder that cannot exist (its parent is a device): nothing can be installed into it or copied from it.
NO_EXTENSION_FOLDER = "/dev/null/duckdb-extensions"
OFFLINE_SETTINGS: dict[str, str | bool] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "extension_directory": NO_EXTENSION_FOLDER,
    "custom_extension_repository": NO_EXTENSION_FOLDER,
    "autoinstall_extension_repository": NO_EXTENSION_FOLDER,
}


def extension_file(name: str) -> Path:
    """The extension's file in its installed package, for the running DuckDB's version (the two are
    released together; another version's file would not load)."""
    package = f"duckdb_extension_{name}"
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"DuckDB's {name} extension is not installed: pip install the dev extras ({package})"
        )
    path = Path(
        spec.submodule_search_locations[0], "extensions", f"v{duckdb.__version__}", f"{name}.duckdb_extension"
    )
    if not path.is_file():
        raise RuntimeError(f"{package} has no {name} extension for DuckDB {duckdb.__version__} ({path})")
    return path


def offline_duckdb() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the avro and iceberg extensions loaded from their packages, times in UTC,
    its configuration locked (see the module's docstring)."""
    connection = duckdb.connect(config=dict(OFFLINE_SETTINGS))
    for name in EXTENSIONS:
        connection.load_extension(str(extension_file(name)))
    connection.execute("SET TimeZone = 'UTC'")
    connection.execute("SET lock_configuration = true")
    return connection


def read_snapshot(
    connection: duckdb.DuckDBPyConnection, metadata_location: str, snapshot_id: int
) -> pa.Table:
    """Every live row of one snapshot of the table whose metadata file is `metadata_location` (a path or
    a `file:` URI), as Arrow."""
    return connection.execute(
        "SELECT * FROM iceberg_scan(?, snapshot_from_id := ?)", [metadata_location, snapshot_id]
    ).to_arrow_table()


def offline_read_command(metadata_location: str, snapshot_id: int) -> str:
    """A shell line that counts the rows of a snapshot from its metadata file with DuckDB's Python
    package, offline: the avro and iceberg extensions loaded from their PyPI packages' files
    (`duckdb-extension-avro`, `duckdb-extension-iceberg`, at DuckDB's own version), never `INSTALL`ed
    (which downloads them)."""
    location = metadata_location.replace("'", "''")
    loads = "; ".join(f"c.load_extension('{extension_file(name)}')" for name in EXTENSIONS)
    query = f"SELECT count(*) FROM iceberg_scan('{location}', snapshot_from_id := {snapshot_id})"
    return f'{sys.executable} -c "import duckdb; c = duckdb.connect(); {loads}; print(c.sql(\\"{query}\\"))"'
