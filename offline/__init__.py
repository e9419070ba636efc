"""Offline verification: run the Pulumi program against a recording engine (see engine.py)."""
