"""`dvmirror`: mirror a Delta table with deletion vectors into Iceberg from the command line.

    dvmirror sync DELTA_TABLE_PATH --table NAMESPACE.NAME [--catalog-uri sqlite:///PATH/catalog.db]
        [--catalog-property KEY=VALUE ...] [--config FILE] [--warehouse PATH|URI]
        [--format-version 3|2] [--until-version N] [--allow-root PATH ...] [--json]
        [--follow [--interval SECONDS]]      (--follow: mirror each new version as it appears, until SIGTERM)
    dvmirror sync --tables FILE [catalog flags] [--concurrency N] [--json] [--follow [--interval SECONDS]]
        (every table of a file of DeltaMirrorComponent documents, in one process and one Spark session)
    dvmirror status NAMESPACE.NAME ... [--delta PATH] [catalog flags] [--json]
        (no JVM; each table reported on its own, the exit code the worst of theirs)
    dvmirror verify NAMESPACE.NAME [--version N] [--full] [--delta PATH] [catalog flags] [--json]
        (no JVM without --full; exit 1 when a check fails)
    dvmirror expire NAMESPACE.NAME [--retain-last N] [--older-than DURATION] [--tables FILE] [--dry-run]
        [catalog flags] [--json]     (default: the table's retention, else the newest 10 and 7 days)
    dvmirror drop NAMESPACE.NAME [--dry-run] [catalog flags] [--json]
        (removes only what dv-mirror wrote for the mirror, then its catalog entry; never a Delta file)
    dvmirror --version

The catalog: Iceberg's own catalog properties, e.g. `--catalog-property type=rest --catalog-property
uri=http://127.0.0.1:8181 --catalog-property warehouse=s3://bucket/wh --catalog-property
s3.endpoint=http://127.0.0.1:9000`, or the same keys under `catalog:` in a YAML file (--config FILE or
DVMIRROR_CONFIG, or a tables file's `catalog:`; flags override it, `${VAR}` in it is read from the
environment). Default: the embedded sqlite catalog ./.dvmirror/catalog.db and
warehouse ./.dvmirror/warehouse in the working directory, created by the first sync that mirrors a
version, once its input is checked (--catalog-uri and --warehouse put them anywhere else).
The Delta table may be a local path or an s3:// / s3a://, gs:// or abfs[s]:// / wasb[s]:// URI (the
catalog's s3.*, gcs.* or adls.* properties or the environment give the endpoint and credentials). Every
setting and variable: `dv_assets.mirror.settings`.
Set DVMIRROR_DEBUG=1 to see the traceback of an internal error.

Spark (sync, verify --full, expire) needs Java 17 or newer (JAVA_HOME, else `java` on the PATH). Its jars:
the folder DVMIRROR_JARS names (offline; `make jars`), or ./.jars in a checkout, else the package's own
helper jar with Delta, Iceberg and the JDBC drivers downloaded once from Maven Central into the Ivy cache
DVMIRROR_IVY (default ~/.cache/dvmirror/ivy; later runs reuse it without resolving again).

Exit codes: 0 done (also when there was nothing new), 2 bad input (one line on stderr naming the table,
the version, the file and the reason; the mirror stays at its last good version), 3 internal error,
4 conflict (another writer committed to the Iceberg table meanwhile; nothing of this run was committed;
rerun), 5 storage error (the storage did not answer, after retries, or answered that a file of the log is
gone or may not be read; never a refusal; nothing of the failed version committed). With --json a
failure is reported on stdout too: {"ok": false, "exit_code", "error",
"mirrored_versions" (those committed before the failure), "spark_log"}.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version

from dv_assets.mirror.cli import drop, expire, status, sync, verify
from dv_assets.mirror.secrets import MaskedStream

# Each subcommand's module has the same pair: `add_parser(commands)` registers it (and sets `run`
# on its namespace), `run(args) -> int` is its exit code; text, --json and failures go through output.py.
SUBCOMMANDS = (status, sync, expire, verify, drop)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dvmirror",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('dv-mirror')}")
    commands = parser.add_subparsers(dest="command", required=True)
    for subcommand in SUBCOMMANDS:
        subcommand.add_parser(commands)
    commands.choices["sync"].epilog = parser.epilog  # the exit codes and the catalog, in `sync --help` too
    return parser


def main(argv: list[str] | None = None) -> int:
    # Whatever the command prints goes through `secrets.masked` (output.py: Spark's log too).
    sys.stdout, sys.stderr = MaskedStream(sys.stdout), MaskedStream(sys.stderr)  # type: ignore[assignment]
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
