"""Benchmark scripts (run each standalone from the repository root: ``python bench/<name>.py``)."""
