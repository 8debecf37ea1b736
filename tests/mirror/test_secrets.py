"""`secrets.masked`, the one function every output of the mirror passes its text through: secrets in
properties, in URIs (userinfo, query parameters) and known secret values wherever they appear.
The CLI, Spark's log and Dagster end to end: tests/cli/test_secrets.py."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dv_assets.mirror.secrets import MaskedStream, is_secret_name, mask_file, masked
from dv_assets.mirror.settings import CatalogConfig


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "jdbc:postgresql://127.0.0.1:1/db?user=u&password=CANARY",
            "jdbc:postgresql://127.0.0.1:1/db?user=u&password=***",
        ),
        ("http://admin:CANARY@host/api", "http://admin:***@host/api"),
        ("https://ghp_0123456789abcdef@github.com/x", "https://***@github.com/x"),
        ("jdbc:sqlserver://h;user=u;password=CANARY;db=x", "jdbc:sqlserver://h;user=u;password=***;db=x"),
        (
            "https://acct.blob.core.windows.net/c?sv=2024&sig=CANARY%2F%3D",
            "https://acct.blob.core.windows.net/c?sv=2024&sig=***",
        ),
        (
            "s3.secret-access-key=CANARY, token=CANARY, warehouse=/w",
            "s3.secret-access-key=***, token=***, warehouse=/w",
        ),
        ('{"token": "CANARY", "uri": "http://h"}', '{"token": "***", "uri": "http://h"}'),
        ("--catalog-property=jdbc.password=CANARY", "--catalog-property=jdbc.password=***"),
        # Nothing secret: left as it is.
        ("monkey=banana, key-value store, user@example.com, s3://bucket/a@b", None),
        ("uri=http://127.0.0.1:8181/api?page=2", None),
    ],
)
def test_secrets_in_text_are_masked(text: str, shown: str | None) -> None:
    assert masked(text) == (text if shown is None else shown)
    assert "CANARY" not in masked(text)


@pytest.mark.parametrize(
    "name",
    [
        "jdbc.password",
        "token",
        "s3.secret-access-key",
        "s3.access-key-id",
        "adls.account-key",
        "credential",
        "adls.sas-token.acct",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "sig",
        "api_key",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["uri", "warehouse", "monkey", "oauth2-server-uri", "rest.auth.type", "PATH"]
)
def test_names_that_are_not_secrets(name: str) -> None:
    assert not is_secret_name(name)


def test_a_catalogs_secrets_are_masked_wherever_they_appear(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a catalog holds them, its secrets are masked in any text (a driver's message quoting the
    password alone), and so are the values of secret-named environment variables."""
    catalog = CatalogConfig(
        {
            "type": "rest",
            "uri": "http://admin:Pw%2Fcanary1@127.0.0.1:1/api?token=tokcanary2",
            "credential": "client:clientcanary3",
        }
    )
    described = catalog.describe()
    assert described.startswith("rest catalog (") and "admin:***@127.0.0.1:1/api" in described
    for secret in ("Pw%2Fcanary1", "Pw/canary1", "tokcanary2", "clientcanary3"):
        assert secret not in described
        assert (
            masked(f"FATAL: password authentication failed: {secret}!")
            == "FATAL: password authentication failed: ***!"
        )
    monkeypatch.setenv("MY_SERVICE_TOKEN", "envcanary4")
    assert masked("the server said envcanary4") == "the server said ***"
    assert masked("a short one: abc") == "a short one: abc"


def test_the_working_directory_is_no_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PWD and OLDPWD only look secret-named (`pwd`): a path under the working directory stays readable
    (it printed as `***/table` before)."""
    monkeypatch.setenv("PWD", str(tmp_path))
    monkeypatch.setenv("OLDPWD", str(tmp_path / "before"))
    monkeypatch.setenv("DB_PWD", "pwdcanary5")
    line = f"fleet.t1 is up to date with {tmp_path}/table at version 1 (pwdcanary5)"
    assert masked(line) == f"fleet.t1 is up to date with {tmp_path}/table at version 1 (***)"


def test_streams_and_files_are_masked(tmp_path: Path) -> None:
    out = io.StringIO()
    stream = MaskedStream(out)
    print("dvmirror: uri=http://admin:CANARY@host/api", file=stream)  # type: ignore[arg-type]
    assert out.getvalue() == "dvmirror: uri=http://admin:***@host/api\n"
    log = tmp_path / "spark.log"
    log.write_text("ERROR connecting to jdbc:postgresql://h/db?password=CANARY\nnothing else\n")
    mask_file(str(log))
    assert log.read_text() == "ERROR connecting to jdbc:postgresql://h/db?password=***\nnothing else\n"
