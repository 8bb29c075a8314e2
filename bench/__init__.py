"""Benchmarks: not tests. Each script prints its figures with a same-run baseline."""
