"""Reading a Maven pom.xml (the project's own, jvm/): its direct dependencies as coordinates (a classifier,
such as the GCS connector's `shaded`, is not part of them: Spark's packages cannot name one), and the
coordinates file the package ships (dv_assets/mirror/maven.json, written by `make coordinates`):

    .venv/bin/python -m tests.helpers.maven > dv_assets/mirror/maven.json
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
JVM = Path(__file__).resolve().parents[2] / "jvm"
STORES = ("s3", "gcs", "azure")  # jvm/<store>/pom.xml: one object store's jars each


def _pom(pom: Path) -> tuple[ET.Element, dict[str, str]]:
    root = ET.parse(pom).getroot()
    properties = {
        child.tag.split("}", 1)[-1]: (child.text or "").strip()
        for child in root.findall("m:properties/*", POM_NS)
    }
    return root, properties


def _coordinates(pom: Path, path: str) -> list[str]:
    root, properties = _pom(pom)

    def text(element: ET.Element, tag: str) -> str:
        value = (element.findtext(f"m:{tag}", default="", namespaces=POM_NS) or "").strip()
        return re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], value)

    return sorted(
        f"{text(d, 'groupId')}:{text(d, 'artifactId')}:{text(d, 'version')}"
        for d in root.findall(path, POM_NS)
        if text(d, "scope") != "provided"  # on pyspark's classpath: compiled against, never resolved
    )


def pom_dependencies(pom: Path) -> list[str]:
    """`group:artifact:version` of each direct dependency (not dependencyManagement, not `provided`),
    `${property}` versions resolved from the pom's <properties>, sorted."""
    return _coordinates(pom, "m:dependencies/m:dependency")


def pom_pins(pom: Path) -> list[str]:
    """`group:artifact:version` of each dependencyManagement entry: transitive versions the pom fixes."""
    return _coordinates(pom, "m:dependencyManagement/m:dependencies/m:dependency")


def pom_excluded_groups(pom: Path) -> list[str]:
    """The groups `dependency:copy-dependencies` leaves out (already on pyspark's classpath)."""
    root, _ = _pom(pom)
    found = root.findall(".//m:plugin[m:artifactId='maven-dependency-plugin']//m:excludeGroupIds", POM_NS)
    return sorted(g.strip() for e in found for g in (e.text or "").split(",") if g.strip())


def coordinates_file() -> dict[str, object]:
    """What dv_assets/mirror/maven.json holds: the coordinates Spark resolves (`spark.jars.packages`) for
    the jars jvm/pom.xml (and jvm/{s3,gcs,azure}/pom.xml) copy, and the groups each leaves out."""
    main = JVM / "pom.xml"
    found: dict[str, object] = {
        "comment": "Generated from jvm/pom.xml and jvm/{s3,gcs,azure}/pom.xml by `make coordinates`; do "
        "not edit.",
        "packages": sorted(pom_dependencies(main) + pom_pins(main)),
    }
    for store in STORES:
        pom = JVM / store / "pom.xml"
        found[f"{store}_packages"] = sorted(pom_dependencies(pom) + pom_pins(pom))
    found["excluded_groups"] = pom_excluded_groups(main)
    for store in STORES:
        found[f"{store}_excluded_groups"] = pom_excluded_groups(JVM / store / "pom.xml")
    return found


def coordinates_json() -> str:
    return json.dumps(coordinates_file(), indent=2) + "\n"


if __name__ == "__main__":
    print(coordinates_json(), end="")
