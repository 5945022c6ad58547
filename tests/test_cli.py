"""The command line, driven through its entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ov_agent_ext.cli import example_config, main
from ov_agent_ext.config import OVConfig, load_config

ROOT = Path(__file__).resolve().parents[1]


def test_config_example_json_lists_every_key_with_its_default() -> None:
    shipped = json.loads((ROOT / "config.example.json").read_text())
    assert shipped == example_config()
    assert set(shipped) == {f.alias for f in OVConfig.model_fields.values()}
    # ... and it loads as-is, giving exactly the defaults.
    loaded = load_config(ROOT / "config.example.json", environ={})
    assert loaded.model_dump() == OVConfig().model_dump()


def test_config_shows_values_with_their_sources(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OV_AGENT_EXT_RECALL_BUDGET", "1500")
    monkeypatch.setenv("OPENVIKING_API_KEY", "sk-secret-value")
    assert main(["config", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["recallBudget"] == {"value": 1500, "source": "OV_AGENT_EXT_RECALL_BUDGET"}
    assert shown["apiKey"] == {"value": "********", "source": "OPENVIKING_API_KEY"}
    assert shown["endpoint"]["source"] == "default"


def test_config_text_output_masks_the_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENVIKING_API_KEY", "sk-secret-value")
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "sk-secret-value" not in out
    assert '"********"  (OPENVIKING_API_KEY)' in out


def test_bad_config_exits_2_with_the_key_and_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OV_AGENT_EXT_RECALL_LIMIT", "0")
    assert main(["config"]) == 2
    err = capsys.readouterr().err
    assert "OV_AGENT_EXT_RECALL_LIMIT" in err
    assert "recallLimit" in err
    assert "Traceback" not in err


def test_status_of_an_unreachable_server_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--endpoint", "http://127.0.0.1:9", "status"]) == 1
    err = capsys.readouterr().err
    assert "NOT reachable" in err
    assert "http://127.0.0.1:9" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from ov_agent_ext import __version__

    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == __version__
