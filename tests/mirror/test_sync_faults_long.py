"""The long fault suite (`make test-faults`, not part of `make test`): many rounds of syncs racing on one
table, with the interleaving forced through the commit seam at every version, and two `dvmirror`
processes started at once. Every round ends with one snapshot per Delta version and exact rows."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dv_assets.mirror.errors import EXIT_CONFLICT, MirrorConflictError
from dv_assets.mirror.settings import CatalogConfig
from dv_assets.mirror.sync import sync_table
from tests.helpers.faults import RaceAt
from tests.helpers.paths import DVMIRROR
from tests.helpers.processes import catalog_uri, dvmirror_env
from tests.helpers.readers import assert_mirror_exact

pytestmark = [pytest.mark.spark, pytest.mark.faults]

PARTITIONED = "dv-partitioned-with-checkpoint"  # 16 versions
ROUNDS = 8


@pytest.mark.parametrize("version", range(1, 16))
@pytest.mark.parametrize("format_version", [3, 2])
def test_forced_interleaving_at_every_version(
    spark, catalog, copy_fixture, version: int, format_version: int
):
    root = copy_fixture(PARTITIONED)
    name = f"faults.race_v{format_version}_{version}"
    sync_table(spark, root, name, format_version=format_version, until_version=0)
    # The other sync gets as far as `version` or beyond while this one is about to commit it.
    with pytest.raises(MirrorConflictError):
        sync_table(spark, root, name, iceberg=RaceAt(spark, root, version, min(15, version + version % 3)))
    sync_table(spark, root, name)
    assert_mirror_exact(spark, catalog, name, PARTITIONED, versions=range(16))


def test_two_processes_racing_for_many_rounds(copy_fixture, tmp_path: Path, spark, catalog) -> None:
    env = dvmirror_env()
    root = copy_fixture(PARTITIONED)
    here = CatalogConfig.sqlite(catalog.sqlite_path, catalog.warehouse)
    for round_ in range(ROUNDS):
        name = f"faults.processes_{round_}"
        command = [
            str(DVMIRROR),
            "sync",
            str(root),
            "--table",
            name,
            "--catalog-uri",
            catalog_uri(here),
            "--warehouse",
            str(here.warehouse),
            "--until-version",
            str(4 + round_),
        ]
        racers = [
            subprocess.Popen(
                command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        for racer in racers:
            _, err = racer.communicate(timeout=600)
            assert racer.returncode in (0, EXIT_CONFLICT), err
            if racer.returncode == EXIT_CONFLICT:
                # The first lost race retried at once (one line), the second the run's one error line.
                *retries, last = err.strip().splitlines()
                assert "rerun" in last and len(retries) == 1 and "retrying" in retries[0], err
        final = subprocess.run([*command[:-2]], env=env, cwd=tmp_path, capture_output=True, text=True)
        assert final.returncode == 0, final.stderr
        assert_mirror_exact(spark, catalog, name, PARTITIONED, versions=range(16))
