"""The report of a consistency analysis, for whoever writes it or reads it back.

``report`` (the sections, the modes side by side, the verdicts, ``summary.md`` and the
tables' files, written and read back), ``text`` (shares as percentages and what the
tables mean for a client), ``seeds`` (the measures across seeds and how their intervals
read), ``mode_notes`` (why a figure differs between the modes, which measures are
simulated, which rows a scenario can produce) and ``t_buckets`` (the time buckets of
t-visibility). The Spark analysis (``spark_jobs``) writes a report with it; the console
reads one and renders it the same way. It computes nothing from a history and imports no
other package of the project, nor Django, Spark or matplotlib.
"""
