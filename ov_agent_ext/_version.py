"""The package version, in one place (read by hatch and by the client's User-Agent)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
