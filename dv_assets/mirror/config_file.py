"""The one parser of the mirror's YAML files: the configuration file (`--config`, DVMIRROR_CONFIG) and the
tables file (`dvmirror sync --tables`, DVMIRROR_SOURCES: `DeltaMirrorComponent` documents), so that both
have the same substitution, the same value types and the same errors.

* **Substitution.** `${VAR}` in any string value is replaced by the environment variable VAR; an unset
  one is an error; `$${` writes a literal `${`. (A tables file's strings are then rendered as dg's
  templates: `table_spec.py`.)
* **Catalog values.** A catalog property is a string; a YAML boolean (`s3.path-style-access: true`) is
  written as Iceberg spells it (`true`), a number as its text; anything else (null, a list, a map) is
  an error.
* **Strict.** A missing file, a file that is not YAML, a key given twice in one mapping, an unknown key or
  a value of the wrong type is a `ConfigFileError`: one line naming the file, the line and the key,
  raised before anything starts (`dvmirror` exits 2 with it; the Dagster code location fails to load).

Each mapping read keeps where its keys were (`Located`), so that an error found later (a model's
validation) still names the line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dv_assets.mirror.errors import MirrorInputError

# `${NAME}`, or `$${` (a literal `${`).
_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DANGLING = re.compile(r"(?<!\$)\$\{")

CONFIG_FILE = "configuration file"
TABLES_FILE = "tables file"


class ConfigFileError(MirrorInputError, ValueError):
    """A file the mirror is configured with cannot be used as it is: one line naming the file, the line and
    the key (exit 2 in the CLI; a load error of the code location)."""

    def __init__(
        self, reason: str, *, path: str | Path, kind: str, line: int | None = None, key: str | None = None
    ) -> None:
        self.path = str(path)
        self.kind = kind
        self.line = line
        self.key = key
        super().__init__(reason)

    def one_line(self) -> str:
        where = f"{self.kind} {self.path}"
        if self.line is not None:
            where += f", line {self.line}"
        if self.key:
            where += f", key {self.key}"
        return f"{where}: {self.reason}"


class Located(dict):
    """A YAML mapping as a dict, with the line of the mapping (`line`) and of each of its keys (`lines`)."""

    line: int = 1
    lines: dict[Any, int]

    def line_of(self, key: Any) -> int:
        return self.lines.get(key, self.line)


@dataclass(frozen=True)
class Document:
    """One YAML document of a file: its number (from 1), its first line and its content."""

    number: int
    line: int
    content: Any


@dataclass(frozen=True)
class Source:
    """Where values come from, for errors: the file and what it is (`configuration file`, `tables file`)."""

    path: Path
    kind: str

    def error(self, reason: str, *, line: int | None = None, key: str | None = None) -> ConfigFileError:
        return ConfigFileError(reason, path=self.path, kind=self.kind, line=line, key=key)


def _loader_class() -> type:
    import yaml

    # libyaml's parser when PyYAML has it (~10x faster on a file of hundreds of tables), the same
    # safe constructors either way.
    base = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

    class LocatedLoader(base):  # type: ignore[misc, valid-type]
        pass

    def construct_mapping(loader: Any, node: Any) -> Located:
        loader.flatten_mapping(node)  # `<<:` merge keys, as safe_load does
        mapping = Located()
        mapping.line = node.start_mark.line + 1
        mapping.lines = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise _Duplicate(f"a key must be a plain value, got {type(key).__name__}", line, None)
            if key in mapping:
                raise _Duplicate(f"given twice (first on line {mapping.lines[key]})", line, str(key))
            mapping[key] = loader.construct_object(value_node, deep=True)
            mapping.lines[key] = line
        return mapping

    LocatedLoader.add_constructor("tag:yaml.org,2002:map", construct_mapping)
    return LocatedLoader


class _Duplicate(Exception):
    def __init__(self, reason: str, line: int, key: str | None) -> None:
        super().__init__(reason)
        self.reason, self.line, self.key = reason, line, key


_LOADER: type | None = None


def read_documents(path: str | Path, kind: str) -> list[Document]:
    """The YAML documents of the file at `path`, their mappings `Located` (ConfigFileError: no such file,
    unreadable, not YAML, a key given twice)."""
    import yaml

    global _LOADER
    if _LOADER is None:
        _LOADER = _loader_class()
    source = Source(Path(path).absolute(), kind)
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise source.error("no such file") from None
    except IsADirectoryError:
        raise source.error("a folder, not a file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise source.error(f"cannot be read: {err}") from None
    documents = []
    try:
        loader = _LOADER(text)
        try:
            number = 0
            while loader.check_node():
                node = loader.get_node()
                number += 1
                documents.append(Document(number, node.start_mark.line + 1, loader.construct_document(node)))
        finally:
            loader.dispose()
    except _Duplicate as err:
        raise source.error(err.reason, line=err.line, key=err.key) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = None if mark is None else mark.line + 1
        problem = " ".join(str(err.problem or "").split())
        if err.context:  # e.g. "while parsing a flow sequence" (on line N)
            where = "" if err.context_mark is None else f" (line {err.context_mark.line + 1})"
            problem = f"{' '.join(str(err.context).split())}{where}: {problem}"
        raise source.error(f"not YAML: {problem}", line=line) from None
    except yaml.YAMLError as err:
        raise source.error(f"not YAML: {' '.join(str(err).split())}") from None
    return documents


def substitute(value: Any, source: Source, environ: Mapping[str, str], *, line: int, key: str) -> Any:
    """`value` with `${VAR}` replaced in every string (recursively), from `environ`."""

    def text(string: str, line: int, key: str) -> str:
        return _substitute_text(string, source, environ, line=line, key=key)

    return map_strings(value, text, line=line, key=key)


def map_strings(value: Any, change: Callable[[str, int, str], Any], *, line: int, key: str) -> Any:
    """`value` with every string (recursively; not mapping keys) replaced by `change(string, its line,
    its key)`; mappings stay `Located`."""
    if isinstance(value, str):
        return change(value, line, key)
    if isinstance(value, Located):
        out = Located()
        out.line, out.lines = value.line, dict(value.lines)
        for k, v in value.items():
            out[k] = map_strings(v, change, line=value.line_of(k), key=_join(key, k))
        return out
    if isinstance(value, dict):
        return {k: map_strings(v, change, line=line, key=_join(key, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [map_strings(v, change, line=line, key=f"{key}[{i}]") for i, v in enumerate(value)]
    return value


def _substitute_text(text: str, source: Source, environ: Mapping[str, str], *, line: int, key: str) -> str:
    def var(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:  # `$${`
            return "${"
        if name not in environ:
            raise source.error(
                f"environment variable {name} is not set (named as ${{{name}}})", line=line, key=key
            )
        return environ[name]

    if _DANGLING.search(_REFERENCE.sub("", text)):
        raise source.error(
            "`${` must name an environment variable as ${NAME} (letters, digits, _); `$${` is a literal `${`",
            line=line,
            key=key,
        )
    return _REFERENCE.sub(var, text)


def catalog_properties(value: Any, source: Source, *, line: int, key: str) -> dict[str, str]:
    """A `catalog:` map as catalog properties: strings; a YAML boolean as `true`/`false`, a number as its
    text. Anything else is a ConfigFileError naming the property."""
    if not isinstance(value, dict):
        raise source.error(f"must be a mapping of catalog properties, got {_kind(value)}", line=line, key=key)
    lines = value.lines if isinstance(value, Located) else {}
    out = {}
    for name, item in value.items():
        where = lines.get(name, line)
        if isinstance(item, bool):  # before int: a bool is an int
            out[str(name)] = "true" if item else "false"
        elif isinstance(item, str | int | float):
            out[str(name)] = str(item)
        else:
            raise source.error(
                f"a catalog property is a string, a boolean or a number, got {_kind(item)}",
                line=where,
                key=_join(key, name),
            )
    return out


def load_config_file(path: str | Path, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The configuration file (`--config`, DVMIRROR_CONFIG): YAML with a `catalog:` map of catalog
    properties (ConfigFileError: see the module docstring). Returns `{"catalog": {...}}`."""
    env = os.environ if environ is None else environ
    source = Source(Path(path).absolute(), CONFIG_FILE)
    documents = read_documents(path, CONFIG_FILE)
    contents = [d for d in documents if d.content is not None]
    if len(contents) > 1:
        raise source.error("holds more than one YAML document", line=contents[1].line)
    if not contents:
        return {"catalog": {}}
    raw = contents[0].content
    if not isinstance(raw, Located):
        raise source.error(
            f"must be a mapping with a `catalog:` map, got {_kind(raw)}", line=contents[0].line
        )
    unknown = [k for k in raw if k != "catalog"]
    if unknown:
        first = min(unknown, key=raw.line_of)
        raise source.error("unknown key (known: catalog)", line=raw.line_of(first), key=str(first))
    catalog = raw.get("catalog")
    if catalog is None:
        return {"catalog": {}}
    line = raw.line_of("catalog")
    catalog = substitute(catalog, source, env, line=line, key="catalog")
    return {"catalog": catalog_properties(catalog, source, line=line, key="catalog")}


def line_of(content: Any, location: Sequence[Any], default: int) -> int:
    """The line of the value at `location` (keys and list indexes) in `content`: the deepest mapping key
    found on the way (a key that is not there: its mapping's line)."""
    line = default
    current = content
    for part in location:
        if isinstance(current, Located):
            if part in current:
                line = current.line_of(part)
                current = current[part]
                continue
            return current.line
        if isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
            continue
        break
    return line


def _join(key: str, name: Any) -> str:
    return f"{key}.{name}" if key else str(name)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"
