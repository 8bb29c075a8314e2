"""Real-cluster consistency experiments: boot a cluster, drive a workload, inject one fault,
record the history in the schema of :mod:`experiment_history.schema` (see docs/EXPERIMENTS.md).

``runner.run_experiment`` is the plain-function core; ``manage.py run_experiment`` wraps it.
"""
