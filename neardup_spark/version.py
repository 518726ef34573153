"""The package version (a leaf: anything may import it)."""

__version__ = "0.2.0"
