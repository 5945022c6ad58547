"""Shared fixtures. The autouse fixture keeps every test away from the real home directory
and from any OPENVIKING_* / OV_AGENT_EXT_* variables of the machine running the tests."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Variables the contract suite reads to find the real server; not settings of the package.
_KEEP = {"OV_REAL_URL", "OV_REAL_DIR", "OV_REAL_ROOT_KEY", "OV_REAL_APIKEY_URL"}


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME and XDG dirs under tmp_path; no package variables from outside."""
    home = tmp_path / "home"
    for sub in ("config", "state", "cache", "data"):
        (home / sub).mkdir(parents=True)
    for name in list(os.environ):
        if (name.startswith(("OPENVIKING_", "OV_AGENT_EXT_")) or name.startswith("OV_")) and (
            name not in _KEEP
        ):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    return home


@pytest.fixture(autouse=True)
def package_log_level() -> Iterator[None]:
    """An extension sets the ``ov_agent_ext`` logger's level (config ``logLevel``, for the
    process); restore it so one test's extension cannot silence another test's caplog."""
    logger = logging.getLogger("ov_agent_ext")
    level = logger.level
    yield
    logger.setLevel(level)
