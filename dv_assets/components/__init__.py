"""Dagster component types of dv-mirror (the dg registry module, `[tool.dg.project] registry_modules`)."""

from dv_assets.components.delta_mirror import DeltaMirrorComponent

__all__ = ["DeltaMirrorComponent"]
