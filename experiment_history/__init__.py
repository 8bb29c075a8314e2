"""The record of a consistency experiment, shared by whoever writes one and whoever reads it.

``schema`` (the four tables and ``run.json``), ``runs`` (write and read a run directory),
``clients`` (the RocketMQ client behaviour models that turn a route into traffic) and
``superseding`` (which writes of a register a read may have returned). The real
cluster experiments (``experiments``) and the simulator write histories with it; the Spark
analysis (``spark_jobs``) and the console read them. It imports only ``remoting``, never
Django or Spark, so Spark workers can load it.
"""
