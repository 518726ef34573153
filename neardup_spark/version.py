"""The package version (a leaf: anything may import it)."""

__version__ = "0.1.0"
