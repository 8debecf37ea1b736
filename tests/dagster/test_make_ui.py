"""`make ui` as a script, a CI job or a test starts it: in the background of a non-interactive shell
(SIGINT ignored), over an empty instance. It serves quietly (no Dagster Preview/Beta warnings from the
project's definitions, a handful of lines), and SIGTERM to make stops it and every process it started
(the webserver, the daemon, the code server and its gRPC server) within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT
from tests.helpers.processes import dvmirror_env, free_port, wait_for_text

pytestmark = pytest.mark.system  # a webserver, a daemon and a code server of its own

STOPPED_WITHIN_SECONDS = 30


def session_processes(session: int) -> list[str]:
    """The processes still alive in session `session` (pid and command line), zombies aside."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        except OSError:
            continue  # ended while we looked
        state, sid = fields[0], int(fields[3])
        if sid == session and state != "Z":
            alive.append(f"{stat.parent.name} {command}")
    return alive


def test_make_ui_serves_quietly_and_stops_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "ui.log"
    port = free_port()
    with log.open("w") as out:
        # `-o setup`: the environment is the test session's own; the recipe is what is under test.
        make = subprocess.Popen(
            ["make", "-o", "setup", "ui", f"UI_PORT={port}", f"UI_HOME={tmp_path / 'dagster_home'}"],
            cwd=REPO_ROOT,
            env=dvmirror_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own session: every process it starts is found by the session id
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as `make ui &` in a script
        )
    try:
        wait_for_text(log, "Serving dagster-webserver", make, seconds=240)
        served = log.read_text(errors="replace")
        assert "PreviewWarning" not in served and "BetaWarning" not in served, served
        assert len(served.splitlines()) <= 12, served

        began = time.monotonic()
        make.send_signal(signal.SIGTERM)
        make.wait(timeout=STOPPED_WITHIN_SECONDS)
        while session_processes(make.pid) and time.monotonic() - began < STOPPED_WITHIN_SECONDS:
            time.sleep(0.5)
        left = session_processes(make.pid)
        took = time.monotonic() - began
        assert not left, f"still running {took:.0f} s after SIGTERM:\n" + "\n".join(left)
        assert make.returncode != 0  # make reports its recipe ended by a signal
        print(f"make ui: {len(served.splitlines())} lines until serving; stopped {took:.1f} s after SIGTERM")
    finally:
        if session_processes(make.pid):
            os.killpg(make.pid, signal.SIGKILL)
