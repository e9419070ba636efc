"""Operator tools that act on the stack they are given (make preflight, results, benchmark, sweep, destroy)."""
