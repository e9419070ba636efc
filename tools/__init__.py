"""Operator tools for a deployed stack (make results, make benchmark)."""
