"""Python's cyclic garbage collector paused around work that allocates much and frees little in cycles.

Such work (the DV conversion of a version, the Dagster definitions of a code location) makes objects by
the million, and the allocations alone trigger the collector: young collections by the dozen and full
ones, each walking every object of the process, that find next to nothing. What reference counting does
not free meanwhile waits for the next collection after the pause."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block, then back as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
