"""benchmark/results.py, unit by unit: exact values, so that a change in its arithmetic or text fails."""
