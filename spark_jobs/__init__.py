"""Offline analysis of consistency experiments: Spark metrics, the checker, calibration and
the report folder of an analysis.

Analysis only: the histories it reads, and the simulator that writes histories at scale,
are :mod:`experiment_history`'s; the report's format, which the console reads back, is
:mod:`experiment_reports`'s. Nothing in this package imports Django: Spark tasks run in
plain Python workers.
"""
