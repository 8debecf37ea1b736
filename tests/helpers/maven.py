"""Reading a Maven pom.xml (the project's own, jvm/): its direct dependencies as coordinates."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def pom_dependencies(pom: Path) -> list[str]:
    """`group:artifact:version` of each direct dependency (not dependencyManagement), `${property}`
    versions resolved from the pom's <properties>, sorted."""
    root = ET.parse(pom).getroot()
    properties = {
        child.tag.split("}", 1)[-1]: (child.text or "").strip()
        for child in root.findall("m:properties/*", POM_NS)
    }

    def text(element: ET.Element, tag: str) -> str:
        value = (element.findtext(f"m:{tag}", default="", namespaces=POM_NS) or "").strip()
        return re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], value)

    return sorted(
        f"{text(d, 'groupId')}:{text(d, 'artifactId')}:{text(d, 'version')}"
        for d in root.findall("m:dependencies/m:dependency", POM_NS)
    )
