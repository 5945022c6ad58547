"""``ov-agent-ext serve``: loopback-only in dev mode, a clear message without the extra."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from ov_agent_ext import cli


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com"])
def test_non_loopback_host_without_api_key_is_refused(
    host: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["serve", "--host", host, "--data-dir", str(tmp_path / "d")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"refusing to listen on {host} without --api-key" in err
    assert not (tmp_path / "d").exists()  # refused before anything was created


def _fake_uvicorn(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import uvicorn

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(app=app, **kwargs))
    return seen


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_host_in_dev_mode_starts(
    host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = _fake_uvicorn(monkeypatch)
    code = cli.main(["serve", "--host", host, "--port", "19999", "--data-dir", str(tmp_path)])
    assert code == 0
    assert (seen["host"], seen["port"]) == (host, 19999)
    out = capsys.readouterr().out
    assert ":19999" in out
    assert "auth mode  dev" in out


def test_any_host_with_an_api_key_starts_in_api_key_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = _fake_uvicorn(monkeypatch)
    argv = ["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path), "--api-key", "root-k"]
    assert cli.main(argv) == 0
    assert seen["host"] == "0.0.0.0"
    out = capsys.readouterr().out
    assert "http://0.0.0.0:1933" in out
    assert "api_key" in out
    assert "root-k" not in out  # the key is never printed


def test_missing_server_extra_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn -> ImportError
    assert cli.main(["serve", "--data-dir", str(tmp_path)]) == 2
    assert "install ov-agent-ext[server]" in capsys.readouterr().err


def test_serve_needs_no_client_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _fake_uvicorn(monkeypatch)
    assert cli.main(["--config", str(bad), "serve", "--data-dir", str(tmp_path / "d")]) == 0


def test_other_commands_do_not_import_the_server() -> None:
    import subprocess

    code = (
        "import sys; from ov_agent_ext import cli; "
        "sys.exit(int(any(m.startswith(('starlette', 'uvicorn', 'ov_agent_ext.server')) "
        "for m in sys.modules)))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
