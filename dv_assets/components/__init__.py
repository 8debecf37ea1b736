"""Dagster component types of dv-mirror (the dg registry module, `[tool.dg.project] registry_modules`)."""

from dv_assets.dagster_warnings import silence_dagster_maturity_warnings

silence_dagster_maturity_warnings()  # first: the component types below build definitions

from dv_assets.components.delta_mirror import DeltaMirrorComponent  # noqa: E402

__all__ = ["DeltaMirrorComponent"]
