"""One small public namespace: every module declares __all__, the package re-exports it."""

from __future__ import annotations

import importlib
import pkgutil

import ov_agent_ext


def test_package_all_is_sorted_and_importable() -> None:
    names = ov_agent_ext.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(ov_agent_ext, name) is not None


def test_every_module_declares_all() -> None:
    for info in pkgutil.iter_modules(ov_agent_ext.__path__):
        module = importlib.import_module(f"ov_agent_ext.{info.name}")
        assert hasattr(module, "__all__"), info.name
        for name in module.__all__:
            assert hasattr(module, name), f"{info.name}.{name}"
