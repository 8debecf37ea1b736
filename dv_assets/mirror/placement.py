"""Where a version's DV work runs: on the driver, or as Spark tasks on the executors (pure).

On the driver a DV costs its C work (a slice of one read of its DV file, CRC-32, the Roaring parse and
checks; issue 18 aims at 20 µs) and its bytes' read. Spark tasks add a job (scheduling, pickling the
shares, a Python worker per task, the results back): far more than a version's driver work until the
version is large, and on a local master they run on the driver's own cores, so they never pay there. On a
cluster they pay from about a second of driver work: `min_dvs` DVs, or `min_bytes` of DV bytes to read
(object storage reads at ~100 MB/s per stream; the executors read in parallel).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_EXECUTOR_DVS = 50_000
DEFAULT_EXECUTOR_BYTES = 256 << 20
LOCAL_MASTER_PREFIX = "local"  # local, local[N], local[*], local-cluster[...]


@dataclass(frozen=True)
class Placement:
    """The choice for one version: on the executors or not, and why (for the version's result)."""

    on_executors: bool
    reason: str


@dataclass(frozen=True)
class ExecutorPolicy:
    """When a version's DVs are converted in Spark tasks: at least `min_dvs` DVs or `min_bytes` DV bytes,
    on a cluster master (`min_dvs` None: never). `on_local_master` lets a local master use them too: the
    tests' way to run the executor path on one machine (DVMIRROR_EXECUTORS_ON_LOCAL=1)."""

    min_dvs: int | None = DEFAULT_EXECUTOR_DVS
    min_bytes: int = DEFAULT_EXECUTOR_BYTES
    on_local_master: bool = False

    def describe(self) -> str:
        """The threshold in force, as a version's result records it."""
        if self.min_dvs is None:
            return "off"
        where = "any master" if self.on_local_master else "cluster masters"
        return f"{self.min_dvs} DVs or {self.min_bytes} bytes, on {where}"

    def place(self, dvs: int, dv_bytes: int, master: str) -> Placement:
        """Where the DV work of a version of `dvs` DVs holding `dv_bytes` bytes runs on `master`."""
        if dvs == 0:
            return Placement(False, "none: no DVs")
        if self.min_dvs is None:
            return Placement(False, "driver: executors off")
        if master.startswith(LOCAL_MASTER_PREFIX) and not self.on_local_master:
            return Placement(False, f"driver: local master {master}")
        if dvs >= self.min_dvs:
            return Placement(True, f"executors: {dvs} DVs >= {self.min_dvs} on {master}")
        if dv_bytes >= self.min_bytes:
            return Placement(True, f"executors: {dv_bytes} DV bytes >= {self.min_bytes} on {master}")
        return Placement(
            False, f"driver: {dvs} DVs < {self.min_dvs} and {dv_bytes} DV bytes < {self.min_bytes}"
        )


DEFAULT_EXECUTOR_POLICY = ExecutorPolicy()
