"""The Iceberg JSON the mirror sends to Iceberg Java stays byte for byte what it was.

`tests/data/schema_json_before_issue_15.json` was recorded from the dict-based schema code before the
schemas became typed (issue 15): for each Delta schema (evolved from an earlier case's result when
`evolve_from` is set), `json.dumps` of the Iceberg schema, the name mapping and the partition spec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dv_assets.mirror.iceberg.schema import evolve, name_mapping, partition_spec, to_iceberg_schema

GOLDEN = json.loads((Path(__file__).parent / "data" / "schema_json_before_issue_15.json").read_text())
CASES: list[dict[str, Any]] = GOLDEN["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_iceberg_json_is_what_it_was(case: dict[str, Any]) -> None:
    schemas: dict[str, Any] = {}
    for earlier in CASES[: CASES.index(case) + 1]:
        previous = schemas.get(earlier["evolve_from"])
        delta, mode = earlier["delta"], earlier["mode"]
        schemas[earlier["name"]] = (
            to_iceberg_schema(delta, mode) if previous is None else evolve(previous, delta, mode)
        )
    schema = schemas[case["name"]]
    assert json.dumps(schema) == case["iceberg"]
    assert json.dumps(name_mapping(schema, case["delta"], case["mode"])) == case["name_mapping"]
    assert json.dumps(partition_spec(schema, case["partition_columns"])) == case["partition_spec"]
