"""The record of a consistency experiment, shared by whoever writes one and whoever reads it.

``schema`` (the four tables and ``run.json``), ``runs`` (write and read a run directory),
``clients`` (the RocketMQ client behaviour models that turn a route into traffic),
``superseding`` (which writes of a register a read may have returned) and ``simulate``
(a discrete-event model of both designs that writes histories at scales no real cluster
here reaches). The real cluster experiments (``experiments``) and the simulator write
histories with it; the Spark analysis (``spark_jobs``) and the console read them. It
imports only ``remoting`` (and the simulator the modes' words, ``raftstore.vocab``),
never Django or Spark, so Spark workers can load it.
"""
