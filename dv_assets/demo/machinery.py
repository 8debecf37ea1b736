"""How the demo drives Dagster: with the code the daemon of `make ui` runs, in the demo's own process.

* The code location is loaded in process under its own name (`dv_mirror`: `[tool.dg.project]` in
  pyproject.toml, workspace.yaml) from the module `make ui` loads, so sensors, jobs and runs carry the
  location and repository the UI knows: it shows the sensor's ticks and cursor, and the runs as launched
  by the sensor (or by the demo, `dagster job launch`'s way), re-executable from the UI.
* A sensor is evaluated by Dagster's sensor daemon (`execute_sensor_iteration`), switched on for that one
  tick and then off again (the demo's component declares its sensors stopped): the tick, the cursor, the
  partitions it adds and the runs it requests are recorded on the instance as the daemon records them.
* Runs are queued (dagster.yaml's run queue and its limits) and dequeued by the run queue's daemon
  (`QueuedRunCoordinatorDaemon`), which launches them with `InProcessRunLauncher`: in this process,
  with the in-process executor, so every step shares the Spark session the demo already started. (The
  daemon of `make ui` launches each run in a process of its own, each step in its own process.)

Dagster's daemon and workspace machinery is not exported as `dg.*`; the private imports below are it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._cli.job import _create_run  # what `dagster job launch` does
from dagster._config.config_schema import UserConfigSchema
from dagster._core.events import DagsterEventType
from dagster._core.execution.api import execute_run
from dagster._core.instance.ref import InstanceRef
from dagster._core.launcher import LaunchRunContext, RunLauncher
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.remote_representation.external import RemoteRepository, RemoteSensor
from dagster._core.scheduler.instigation import InstigatorTick
from dagster._core.storage.dagster_run import DagsterRunStatus
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from dagster._daemon.sensor import execute_sensor_iteration
from dagster._record import copy
from dagster._serdes import ConfigurableClass
from dagster._serdes.config_class import ConfigurableClassData
from dagster._utils.hosted_user_process import recon_job_from_origin

LOCATION_NAME = "dv_mirror"  # pyproject.toml's code_location_name, workspace.yaml's location_name
MODULE_NAME = "dv_assets.definitions"
REPOSITORY_NAME = "__repository__"  # what Dagster names the repository of a `dg.Definitions`
# How the demo's launcher executes a run: step logs to the instance only. (Every job of the code location
# has the in-process executor already, jobs.py: one Spark session, the demo's own.)
QUIET_RUN_CONFIG: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
# The daemons' own progress lines ("Checking for new runs for sensor ...") stay off the demo's output.
DAEMON_LOG = logging.getLogger("dv_assets.demo.daemon")
DAEMON_LOG.setLevel(logging.WARNING)


class InProcessRunLauncher(RunLauncher, ConfigurableClass):
    """Executes a launched run to its end, in this process (the run's stored config is left as the sensor
    or the demo gave it; only where it executes differs, and its console log level)."""

    def __init__(self, inst_data: ConfigurableClassData | None = None) -> None:
        self._inst_data = inst_data
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        return {}

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]
    ) -> InProcessRunLauncher:
        return cls(inst_data=inst_data)

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        if context.job_code_origin is None:
            raise ValueError(f"run {run.run_id} has no code origin: it was not launched from a code location")
        quiet = copy(run, run_config={**run.run_config, **QUIET_RUN_CONFIG})
        execute_run(recon_job_from_origin(context.job_code_origin), quiet, self._instance)

    def terminate(self, run_id: str) -> bool:
        return False  # a run launched here has finished by the time launch_run returns


def open_instance(home: Path) -> dg.DagsterInstance:
    """The instance of `home` (its dagster.yaml: storage, run queue, limits), launching runs with
    `InProcessRunLauncher`; the launcher is this object's only, never written to dagster.yaml."""
    launcher = {"module": __name__, "class": InProcessRunLauncher.__name__, "config": {}}
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides={"run_launcher": launcher}))


@dataclass
class RunOutcome:
    """What one run recorded: its status, materializations, check evaluations and op outputs' metadata."""

    run: dg.DagsterRun
    materializations: list[dg.AssetMaterialization] = field(default_factory=list)
    evaluations: list[dg.AssetCheckEvaluation] = field(default_factory=list)
    output_metadata: dict[str, Mapping[str, dg.MetadataValue]] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.run.status == DagsterRunStatus.SUCCESS


@dataclass
class SensorTick:
    """One tick of a sensor as the instance recorded it."""

    status: str
    cursor: str | None
    run_ids: Sequence[str]
    error: str | None


class DemoMachinery:
    """The code location loaded in process, over `instance`: sensor ticks, launches and the run queue."""

    def __init__(self, instance: dg.DagsterInstance, context: WorkspaceProcessContext) -> None:
        self.instance = instance
        self.context = context
        self.queue = QueuedRunCoordinatorDaemon(interval_seconds=1)

    def repository(self) -> RemoteRepository:
        location = self.context.create_request_context().get_code_location(LOCATION_NAME)
        return location.get_repository(REPOSITORY_NAME)

    def sensor(self, name: str) -> RemoteSensor:
        return self.repository().get_sensor(name)

    def tick_sensor(self, name: str) -> SensorTick:
        """One tick of sensor `name` by the sensor daemon, the sensor switched on for it and then back
        to how it was."""
        sensor = self.sensor(name)
        was_running = sensor.get_current_instigator_state(
            self.instance.get_instigator_state(sensor.get_remote_origin_id(), sensor.selector_id)
        ).is_running
        self.instance.start_sensor(sensor)
        try:
            for _ in execute_sensor_iteration(
                self.context, DAEMON_LOG, threadpool_executor=None, submit_threadpool_executor=None
            ):
                pass
        finally:
            if not was_running:
                self.instance.stop_sensor(sensor.get_remote_origin_id(), sensor.selector_id, sensor)
        ticks: Sequence[InstigatorTick] = self.instance.get_ticks(
            sensor.get_remote_origin_id(), sensor.selector_id, limit=1
        )
        if not ticks:
            raise RuntimeError(f"the sensor daemon recorded no tick of {name}")
        tick = ticks[0]
        return SensorTick(
            status=tick.status.value,
            cursor=tick.cursor,
            run_ids=list(tick.run_ids),
            error=tick.error.message if tick.error else None,
        )

    def launch_job(
        self,
        job_name: str,
        run_config: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """Queue a run of `job_name` from the code location, as `dagster job launch` does; its id."""
        location = self.context.create_request_context().get_code_location(LOCATION_NAME)
        repository = location.get_repository(REPOSITORY_NAME)
        run = _create_run(
            instance=self.instance,
            code_location=location,
            remote_repo=repository,
            remote_job=repository.get_full_job(job_name),
            run_config=dict(run_config or {}),
            tags=dict(tags or {}),
            op_selection=None,
            run_id=None,
        )
        return self.instance.submit_run(run.run_id, self.context.create_request_context()).run_id

    def drain_queue(self) -> None:
        """Dequeue and launch every queued run, as the run queue's daemon does (the launcher executes
        each to its end), until none is left."""
        while self.instance.get_runs(filters=dg.RunsFilter(statuses=[DagsterRunStatus.QUEUED])):
            for _ in self.queue.run_iteration(self.context):
                pass

    def outcome(self, run_id: str) -> RunOutcome:
        run = self.instance.get_run_by_id(run_id)
        if run is None:
            raise RuntimeError(f"no run {run_id} on the instance")
        found = RunOutcome(run)
        for record in self.instance.all_logs(run_id):
            event = record.dagster_event
            if event is None:
                continue
            if event.event_type == DagsterEventType.ASSET_MATERIALIZATION:
                found.materializations.append(event.step_materialization_data.materialization)
            elif event.event_type == DagsterEventType.ASSET_CHECK_EVALUATION:
                found.evaluations.append(event.asset_check_evaluation_data)
            elif event.event_type == DagsterEventType.STEP_OUTPUT and event.step_key:
                found.output_metadata[event.step_key] = event.step_output_data.metadata
        return found


@contextmanager
def demo_machinery(instance: dg.DagsterInstance) -> Iterator[DemoMachinery]:
    """The code location `dv_mirror` loaded in this process from the working directory."""
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(
            executable_path=sys.executable,
            module_name=MODULE_NAME,
            attribute="defs",
            working_directory=os.getcwd(),
        ),
        location_name=LOCATION_NAME,
    )
    with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as context:
        entry = context.create_request_context().get_code_location_entries()[LOCATION_NAME]
        if entry.load_error is not None:
            raise RuntimeError(f"the code location {LOCATION_NAME} did not load: {entry.load_error.message}")
        yield DemoMachinery(instance, context)
