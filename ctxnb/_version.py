"""The version of ctxnb (one place; the package and the trace records read it)."""

__version__ = "0.1.0"
