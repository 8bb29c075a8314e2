"""The projection: keeps the node's Django tables equal to its route table.

The replicator calls :meth:`~namesrv_app.projection.writer.ProjectionWriter.on_applied`
on its apply thread after every command. That call reads only the keys named in
``ApplyResult.changes`` out of the table and merges them, as a
:class:`~namesrv_app.projection.delta.Delta`, into the one delta waiting for the writer
(the later value of a key wins); it never touches the database, so apply is never held up
by SQL. One writer thread takes the waiting delta whole and writes it in ONE
``transaction.atomic()``, stamping each written row and the
:class:`~namesrv_app.models.NodeState` row with the applied version. However fast
commands apply, what waits is bounded by the table's size: a writer that falls behind
writes fewer, larger transactions.

A rebuild (at start, after a failed write, or when a snapshot replaced the table)
rewrites everything from a fresh read of the table; a waiting delta no newer than that
read is skipped.

One module per job, each importing only the ones listed before it:

- :mod:`.pacing`: the writer's share of a core (a CPU duty cycle), kept between chunks;
- :mod:`.sql`: prepared INSERT/DELETE statements in chunks (imports pacing);
- :mod:`.delta`: the Delta and FullState shapes and every read of the table (imports
  pacing);
- :mod:`.rows`: the rows a delta or a full state becomes, in one transaction (imports
  sql and delta);
- :mod:`.digest`: when the stored state digest is refreshed (imports nothing here);
- :mod:`.writer`: the ProjectionWriter thread that ties them together (imports all).

This file imports none of them: import what you use from its module.
"""
