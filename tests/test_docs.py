"""The documentation stays true to the code, without a JVM: every relative link in README.md and docs/*.md
resolves (the file exists, an `#anchor` is a heading of it), every flag of every `dvmirror` subcommand is
in docs/cli.md, every `DVMIRROR_*` variable the package reads is documented, and the README stays short."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from dv_assets.mirror.cli import build_parser
from tests.helpers.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
README_MAX_BYTES = 10_240
# `DVMIRROR_S3` has a digit: the name is letters, digits and underscores after the prefix.
VARIABLE = re.compile(r"\bDVMIRROR_[A-Z0-9_]*[A-Z0-9]\b")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(page: Path) -> set[str]:
    """The `#anchors` GitHub makes of a page's headings (lower case, punctuation dropped, spaces to
    hyphens, a repeated heading numbered)."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(page.read_text()):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def relative_links(page: Path) -> list[str]:
    return [
        target
        for line in _prose(page.read_text())
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def test_every_relative_link_resolves() -> None:
    broken = []
    checked = 0
    for page in PAGES:
        for target in relative_links(page):
            checked += 1
            path, _, anchor = target.partition("#")
            file = page if not path else (page.parent / path).resolve()
            if not file.exists():
                broken.append(f"{page.relative_to(REPO_ROOT)}: {target} (no such file)")
            elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
                broken.append(f"{page.relative_to(REPO_ROOT)}: {target} (no such heading)")
    assert checked > 50, checked
    assert broken == []


def cli_flags() -> dict[str, set[str]]:
    """Every option string of `dvmirror` and of each of its subcommands, from the parser itself."""
    parser = build_parser()
    flags = {"dvmirror": {s for a in parser._actions for s in a.option_strings}}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                flags[name] = {s for a in sub._actions for s in a.option_strings}
    return flags


def test_every_cli_flag_is_in_the_cli_page() -> None:
    flags = cli_flags()
    assert set(flags) == {"dvmirror", "sync", "status", "verify", "expire", "drop"}
    assert {"--follow", "--interval", "--retain-last", "--dry-run", "--full", "--delta"} <= set().union(
        *flags.values()
    )
    page = (DOCS / "cli.md").read_text()
    missing = sorted(
        f"dvmirror {command} {flag}"
        for command, options in flags.items()
        for flag in options
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", page)
    )
    assert missing == []


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    sources = [*(REPO_ROOT / "dv_assets").rglob("*.py"), *(REPO_ROOT / "resources").rglob("*.py")]
    read = {name for path in sources for name in VARIABLE.findall(path.read_text())}
    assert {"DVMIRROR_JARS", "DVMIRROR_S3", "DVMIRROR_DEBUG"} <= read
    documented = {name for page in PAGES for name in VARIABLE.findall(page.read_text())}
    assert sorted(read - documented) == []


def test_the_readme_is_short() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes"
