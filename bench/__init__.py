"""Benchmarks: each prints a table and writes its figures with date, GPU and commit to docs/."""
