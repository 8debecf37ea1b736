"""The driver JVM's class-data-sharing archive (Java's AppCDS): the classes a sync loads (Spark's, Scala's,
Hadoop's, and those of `spark.jars`: Delta, Iceberg, the helper), mapped from one file at start instead of
read, verified and linked from the jars every time.

Measured (issue 35, Java 17, load 5, alternated): a Spark session's start 22.2 and 32.2 s without it, 13.4
and 17.7 s with it; the first sync after it 5.5 and 8.8 s, 2.9 and 4.7 s. A JVM start is most of a small
version's run, of a Dagster mirror run and of a CLI test.

`python -m dv_assets.mirror.class_archive` (`make setup` runs it) writes `dvmirror-classes.jsa` (~200 MiB)
into the jars folder (else the Ivy folder): a sync of a small Delta table with a deletion vector in a JVM
of its own, whose loaded classes the JVM dumps as it exits (`-XX:ArchiveClassesAtExit`). Written under a
temporary name and moved into place once that JVM has exited, its size recorded beside it: a JVM handed a
truncated archive crashes, so a start maps the archive only when it has the recorded size. The JVM checks
the rest itself: an archive of another Java, or of a classpath since changed, is not mapped, and a class
whose bytes in its jar differ from the archived one's is loaded from the jar (so a rebuilt helper jar is
never shadowed). The archive changes how classes are loaded, never which, nor what runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from dv_assets.mirror.settings import CatalogConfig, MirrorSettings
from dv_assets.mirror.spark import (
    CDS_QUIET,
    CLASS_ARCHIVE,
    CLASS_ARCHIVE_RECORD,
    LOG4J2_CONFIG,
    class_archive_folder,
    get_or_create_spark,
)

TRAINING_TABLE = "dvmirror_archive.training"
JVM_EXIT_SECONDS = 120


def write_archive(settings: MirrorSettings) -> Path:
    """The archive of `settings`' JVM, (re)written by a training sync in a process of its own."""
    folder = class_archive_folder(settings)
    folder.mkdir(parents=True, exist_ok=True)
    # No start maps the old archive while it is replaced.
    (folder / CLASS_ARCHIVE_RECORD).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="dvmirror-archive-") as work:
        partial = folder / f".{CLASS_ARCHIVE}.partial"
        partial.unlink(missing_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "dv_assets.mirror.class_archive", "--train", str(partial), work],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise RuntimeError(f"the training sync failed (exit {done.returncode}): {' / '.join(tail)}")
        partial.replace(folder / CLASS_ARCHIVE)
    archive = folder / CLASS_ARCHIVE
    (folder / CLASS_ARCHIVE_RECORD).write_text(json.dumps({"bytes": archive.stat().st_size}))
    return archive


def _train(partial: Path, work: Path) -> None:
    """In the child: a sync of a small Delta table with a DV (created here) into a catalog of its own and
    the mirror read back, then Spark stopped and its JVM waited for while it dumps the archive."""
    from dv_assets.mirror.sync import sync_table

    settings = MirrorSettings.resolve(catalog=CatalogConfig.under(work / "iceberg"))
    dump = f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG} -XX:ArchiveClassesAtExit={partial} {CDS_QUIET}"
    spark = get_or_create_spark(settings, {"spark.driver.extraJavaOptions": dump})
    delta = str(work / "delta")
    spark.sql(
        f"CREATE TABLE delta.`{delta}` (id BIGINT, name STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.range(1000).selectExpr("id", "CAST(id AS STRING) AS name").write.format("delta").mode(
        "append"
    ).save(delta)
    spark.sql(f"DELETE FROM delta.`{delta}` WHERE id % 7 = 0")
    sync_table(spark, delta, TRAINING_TABLE)
    spark.table(f"dvmirror.{TRAINING_TABLE}").count()
    jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]  # the JVM pyspark launched
    spark.stop()
    jvm.stdin.close()  # the gateway's signal to exit; the archive is written as it does
    if jvm.wait(timeout=JVM_EXIT_SECONDS) != 0:
        raise RuntimeError(f"the JVM exited with {jvm.returncode} while writing {partial}")


def main() -> int:
    if sys.argv[1:2] == ["--train"]:
        _train(Path(sys.argv[2]), Path(sys.argv[3]))
        return 0
    settings = MirrorSettings.resolve()
    try:
        write_archive(settings)  # quiet when it succeeds, as set-up is
    except RuntimeError as err:
        # Spark starts without it, only slower: set-up goes on, saying why.
        print(f"dvmirror: no class archive in {class_archive_folder(settings)}: {err}", file=sys.stderr)
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
