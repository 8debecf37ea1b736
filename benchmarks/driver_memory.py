"""Peak driver memory of a piece of work: the Python process's peak resident set (VmHWM) plus the JVM
heap pools' peak use, both reset just before the work (as bench.py's memory figure measures it)."""

from __future__ import annotations

import gc
from pathlib import Path

from pyspark.sql import SparkSession


def _heap_pools(spark: SparkSession) -> list:
    factory = spark._jvm.java.lang.management.ManagementFactory
    return [p for p in factory.getMemoryPoolMXBeans() if str(p.getType()) == "Heap memory"]


def reset_peaks(spark: SparkSession) -> None:
    gc.collect()
    spark._jvm.java.lang.System.gc()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak resident set
    for pool in _heap_pools(spark):
        pool.resetPeakUsage()


def peaks(spark: SparkSession) -> tuple[int, int]:
    """Bytes: the Python peak resident set and the JVM heap's peak use since `reset_peaks`."""
    status = Path("/proc/self/status").read_text()
    python_peak = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1])
    jvm_peak = sum(int(pool.getPeakUsage().getUsed()) for pool in _heap_pools(spark))
    return python_peak * 1024, jvm_peak
