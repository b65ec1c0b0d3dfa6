"""Ops with their own communication algorithm, one file per algorithm."""
