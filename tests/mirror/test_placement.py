"""Where a version's DV work runs (`placement.py`, pure) and the settings that shape it."""

from __future__ import annotations

import pytest

from dv_assets.mirror.placement import DEFAULT_EXECUTOR_BYTES, DEFAULT_EXECUTOR_DVS, ExecutorPolicy
from dv_assets.mirror.settings import CatalogConfig, MirrorSettings


def test_a_local_master_keeps_every_version_on_the_driver_whatever_its_size() -> None:
    policy = ExecutorPolicy(min_dvs=1000)
    for master in ("local", "local[2]", "local[*]"):
        placement = policy.place(1_000_000, 10**10, master)
        assert not placement.on_executors
        assert placement.reason == f"driver: local master {master}"


def test_a_cluster_master_uses_executors_from_the_dv_count_or_the_bytes() -> None:
    policy = ExecutorPolicy(min_dvs=1000, min_bytes=1 << 20)
    master = "spark://10.0.0.5:7077"
    by_count = policy.place(1000, 5000, master)
    assert by_count.on_executors and by_count.reason == f"executors: 1000 DVs >= 1000 on {master}"
    by_bytes = policy.place(10, 1 << 20, master)
    assert by_bytes.on_executors and by_bytes.reason == f"executors: 1048576 DV bytes >= 1048576 on {master}"
    small = policy.place(999, (1 << 20) - 1, "yarn")
    assert not small.on_executors
    assert small.reason == "driver: 999 DVs < 1000 and 1048575 DV bytes < 1048576"


def test_off_no_dvs_and_the_forced_local_path() -> None:
    assert (
        ExecutorPolicy(min_dvs=None).place(10**6, 10**10, "spark://h:7077").reason == "driver: executors off"
    )
    assert ExecutorPolicy(min_dvs=1).place(0, 0, "spark://h:7077").reason == "none: no DVs"
    forced = ExecutorPolicy(min_dvs=1, on_local_master=True).place(3, 100, "local[2]")
    assert forced.on_executors and forced.reason == "executors: 3 DVs >= 1 on local[2]"
    assert ExecutorPolicy(min_dvs=None).describe() == "off"
    assert ExecutorPolicy(min_dvs=5, min_bytes=7).describe() == "5 DVs or 7 bytes, on cluster masters"
    assert ExecutorPolicy(min_dvs=5, min_bytes=7, on_local_master=True).describe() == (
        "5 DVs or 7 bytes, on any master"
    )


def _settings(environ: dict[str, str], **explicit: str) -> MirrorSettings:
    return MirrorSettings.resolve(catalog=CatalogConfig.under("/tmp/unused"), environ=environ, **explicit)


def test_settings_read_the_executor_variables() -> None:
    assert _settings({}).executors == ExecutorPolicy(DEFAULT_EXECUTOR_DVS, DEFAULT_EXECUTOR_BYTES, False)
    env = {
        "DVMIRROR_EXECUTOR_DVS": "20000",
        "DVMIRROR_EXECUTOR_BYTES": "1000000",
        "DVMIRROR_EXECUTORS_ON_LOCAL": "1",
    }
    assert _settings(env).executors == ExecutorPolicy(20000, 1_000_000, True)
    assert _settings(env, executor_dvs="off").executors.min_dvs is None
    assert _settings({"DVMIRROR_EXECUTOR_DVS": "off"}).executor_dvs == "off"
    with pytest.raises(ValueError, match="DVMIRROR_EXECUTOR_BYTES must be a positive number of bytes"):
        _settings({"DVMIRROR_EXECUTOR_BYTES": "1g"})
