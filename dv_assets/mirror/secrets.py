"""Secrets never shown: `masked(text)` is the one function every output of the mirror passes its text
through (the CLI's stdout and stderr and the Spark log it keeps, `CatalogConfig.describe`, the Dagster
failures, metadata and sensor messages).

What it masks, as `***`:
* the value of a property or parameter whose name says it is a secret (`jdbc.password=…`, `token=…`,
  `s3.secret-access-key=…`, a URI's `?password=…&sig=…` or `;password=…`, a JSON `"token": "…"`);
* the userinfo of a URI (`http://admin:***@host`, `https://***@host` when it is a user alone, which may be
  a token);
* wherever they appear, the secret values of every catalog this process was given (`remember_secrets`,
  which `CatalogConfig` calls with its properties: a secret substituted from `${VAR}` too) and of the
  environment variables whose names say they are secrets (`AWS_SECRET_ACCESS_KEY`, `…_TOKEN`), so that
  a driver's or a server's message that quotes one is masked as well.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import IO, Any
from urllib.parse import unquote

MASK = "***"
# A property, parameter or variable name that holds a secret: one with a word of these in it, or one that
# ends in `key` or `sig` after a separator (`adls.account-key`, a SAS URI's `sig`).
_SECRET_NAME = (
    r"(?:[\w.\-]*(?:secret|passw|pwd|token|credential|key-id|api[-_.]?key|signature)[\w.\-]*"
    r"|(?:[\w.\-]*[-_.])?(?:key|sig))"
)
_SECRET_NAME_ONLY = re.compile(_SECRET_NAME, re.IGNORECASE)
# `name=value` of such a name in a property list or a URI's query (after `?`, `&` or `;`); the value ends
# where a URI's next parameter, a list's next item or the text's quoting does.
_ASSIGNMENT = re.compile(
    rf"(?<![\w.\-])(?P<name>{_SECRET_NAME})=(?P<value>[^\s&;,?#'\"<>)\]}}]+)", re.IGNORECASE
)
# `"name": "value"` in JSON.
_JSON_MEMBER = re.compile(r'"(?P<name>[\w.\-]+)"(?P<colon>\s*:\s*)"(?P<value>(?:[^"\\]|\\.)*)"')
# A URI's userinfo: `scheme://user[:password]@`.
_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/@:?#'\"]*)(?::[^\s/@?#'\"]*)?@"
)
# Shorter values are not searched for wherever they appear (they would mask ordinary words).
_MIN_REMEMBERED = 6
# A URI's user without a password is searched for only this long (a token, not `postgres`).
_MIN_USER_ALONE = 16

# Variables the shell sets to directories, whose names only look secret-named (`pwd`): the working
# directory is no secret, and masking it hid every path under it in the output.
_SHELL_DIRECTORIES = frozenset({"PWD", "OLDPWD"})

_remembered: set[str] = set()
_lock = threading.Lock()


def is_secret_name(name: str) -> bool:
    """Whether a property, parameter or variable of this name holds a secret."""
    return _SECRET_NAME_ONLY.fullmatch(name) is not None


def masked(text: str) -> str:
    """`text` with every secret it holds replaced by `***` (see the module's docstring)."""
    if not text:
        return text
    for secret in sorted(_known_secrets(), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    text = _USERINFO.sub(_userinfo, text)
    text = _JSON_MEMBER.sub(
        lambda m: f'"{m["name"]}"{m["colon"]}"{MASK}"' if is_secret_name(m["name"]) else m[0], text
    )
    return _ASSIGNMENT.sub(lambda m: f"{m['name']}={MASK}", text)


def remember_secrets(properties: Mapping[str, str]) -> None:
    """Remember the secrets among catalog `properties` (secret-named values, and the passwords and
    secret parameters inside URI values), so that `masked` finds them in any text."""
    found = set(_secrets_in(properties.items()))
    with _lock:
        _remembered.update(found)


def _secrets_in(items: Iterable[tuple[str, str]]) -> Iterable[str]:
    for name, value in items:
        if is_secret_name(name):
            yield value
            yield value.rpartition(":")[2]  # Iceberg REST's `credential` is `client-id:client-secret`
        for match in _USERINFO.finditer(value):
            user, _, password = match[0][len(match["scheme"]) : -1].partition(":")
            if password:
                yield from (password, unquote(password))
            elif len(user) >= _MIN_USER_ALONE:  # a token as the user alone; not a short user name
                yield from (user, unquote(user))
        for match in _ASSIGNMENT.finditer(value):
            yield from (match["value"], unquote(match["value"]))


def _known_secrets() -> set[str]:
    """The remembered secrets and the secret-named environment variables' values, long enough to search."""
    with _lock:
        known = set(_remembered)
    known.update(
        _secrets_in(
            (k, v) for k, v in os.environ.items() if is_secret_name(k) and k not in _SHELL_DIRECTORIES
        )
    )
    return {s for s in known if len(s) >= _MIN_REMEMBERED}


def _userinfo(match: re.Match[str]) -> str:
    userinfo = match[0][len(match["scheme"]) : -1]
    user, colon, _ = userinfo.partition(":")
    return f"{match['scheme']}{user}:{MASK}@" if colon else f"{match['scheme']}{MASK}@"


class MaskedStream:
    """A text stream whose every write goes through `masked` (the CLI's stdout and stderr)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(masked(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def mask_file(path: str) -> None:
    """Rewrite a text file (Spark's log, kept for a failure) with its secrets masked."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    hidden = masked(text)
    if hidden != text:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(hidden)
