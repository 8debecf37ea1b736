"""`make ui`: `dg dev` (the dg project of pyproject.toml: webserver, daemon, code server) over the demo's
instance, stopping on Ctrl-C and on SIGTERM however it was started.

A job started in the background by a non-interactive shell (`make ui &` in a script, a test, CI) inherits
SIGINT ignored; Dagster maps SIGTERM to its SIGINT handler, so it then ignored SIGTERM too, and make's
forwarding of SIGTERM to its recipe had no effect (and its children, inheriting SIGINT ignored, never
stopped). This puts both back to their defaults and runs `dg dev` in this process (the recipe `exec`s
it: make's SIGTERM and a terminal's Ctrl-C reach it directly), which then stops its webserver, daemon
and code server.

Quiet: Dagster's Preview/Beta warnings are silenced here too (dv_assets/dagster_warnings.py), since `dg
dev` itself lists the component types of every installed Dagster library before it starts; DAGSTER_HOME
defaults to .dagster_home in the working directory, given a dagster.yaml when it has none (as `make demo`
writes it; Dagster warns without one); VIRTUAL_ENV names this interpreter's environment (dg warns, twice,
when it is unset).

    python -m dv_assets.demo.ui [dg dev options]   # default: --host 127.0.0.1 --port 3000
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

# The instance's settings: `make demo` writes them (a fresh instance each time), `make ui` when missing.
DAGSTER_YAML = """\
# Written by `make demo` or `make ui` (dv_assets/demo/ui.py).
telemetry:
  enabled: false
concurrency:
  pools:
    # Steps that write one mirror table (its asset and checks) share the pool dvmirror_<source>.
    default_limit: 1
  runs:
    # Mirror runs of one table go one at a time, in the order they were queued.
    tag_concurrency_limits:
      - key: dvmirror/table
        value:
          applyLimitPerUniqueValue: true
        limit: 1
"""


def write_instance_settings(home: Path, *, replace: bool) -> None:
    home.mkdir(parents=True, exist_ok=True)
    if replace or not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(DAGSTER_YAML)


def main(args: Sequence[str]) -> int:
    for received in (signal.SIGINT, signal.SIGTERM):
        signal.signal(received, signal.default_int_handler)  # Dagster maps SIGTERM to SIGINT's handler
    from dv_assets.dagster_warnings import silence_dagster_maturity_warnings

    silence_dagster_maturity_warnings()
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(Path.cwd() / ".dagster_home")))
    write_instance_settings(home, replace=False)
    os.environ.setdefault("VIRTUAL_ENV", sys.prefix)
    from dagster_dg_cli.cli import main as dg

    sys.argv = ["dg", "dev", *(args or ["--host", "127.0.0.1", "--port", "3000"])]
    return dg()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
