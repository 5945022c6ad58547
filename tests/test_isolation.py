"""The test environment itself: nothing may reach the real home directory."""

from __future__ import annotations

import os
from pathlib import Path

from ov_agent_ext.config import OVConfig, default_config_path


def test_home_and_state_dirs_point_into_tmp(isolated_environment: Path) -> None:
    assert Path(os.environ["HOME"]) == isolated_environment
    assert default_config_path().is_relative_to(isolated_environment)
    assert OVConfig().state_dir.is_relative_to(isolated_environment)


def test_no_openviking_variables_leak_in() -> None:
    assert not [k for k in os.environ if k.startswith(("OPENVIKING_", "OV_AGENT_EXT_"))]
