"""Offline analysis of consistency experiments: histories, Spark metrics, checker, simulator.

Nothing in this package imports Django: Spark tasks run in plain Python workers.
"""
