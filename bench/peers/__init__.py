"""Railyard side by side with other engines on one machine (see run.py)."""
