"""bench.startup's own arithmetic, without starting a cluster (its runs take minutes).

The breakdown is made from what the watcher saw; these check it on a recorded shape of a
real ``cluster up`` (the times of a run on this machine, rounded), and that the import
profile is read from a real ``python -X importtime`` run.
"""

from __future__ import annotations

import os

from bench import startup

RECORDED_UP = [
    startup.Seen("redis", "redis", 1.16, 1.19),
    startup.Seen("migrate --database default", "helper", 1.2, 3.54),
    startup.Seen("collectstatic", "helper", 1.2, 6.91),
    startup.Seen("migrate --database projection", "helper", 3.53, 6.91),
    *(startup.Seen(f"{n}-gateway", "gateway", 6.9, 11.3) for n in startup.NODE_IDS),
    *(startup.Seen(f"{n}-web", "web", 6.92, 10.5) for n in startup.NODE_IDS),
    startup.Seen("worker", "worker", 6.94, 11.8),
    startup.Seen("beat", "beat", 6.96, None),
    startup.Seen("demo", "demo"),
]


def test_the_breakdown_of_an_up_puts_every_step_in_start_order_between_its_bounds() -> None:
    rows = startup.up_rows("first up", 12.2, RECORDED_UP)
    steps = {str(row[1]): (row[2], row[3]) for row in rows}

    assert steps["launcher start (Python, Django, run folder) to Redis spawned"] == (0.0, 1.16)
    # The migrations and collectstatic: from Redis ready to the first gateway spawned.
    assert steps["migrations + collectstatic in all (Redis ready to first gateway spawned)"] == (
        1.19,
        6.9,
    )
    assert steps["`cluster up` in all"] == (0.0, 12.2)
    assert steps["last process ready to `up` returned (negative: ready after)"] == (11.8, 12.2)
    assert steps["beat: spawn to log: beat: Starting..."] == (6.96, None)
    assert startup._span(6.96, None) == "-"
    assert not any("demo" in step for step in steps)  # never started, so no row
    timed = [row for row in rows if "spawn to" in str(row[1])]
    starts = [float(str(row[2])) for row in timed]
    assert starts == sorted(starts) and len(timed) == 12


def test_the_import_profile_names_the_packages_a_real_interpreter_imported() -> None:
    heavy = startup.heaviest_imports("import json, email.message", dict(os.environ), 100)

    packages = dict(heavy)
    assert {"json", "email"} <= set(packages), heavy
    assert all(seconds > 0 for seconds in packages.values())
    assert [s for _, s in heavy] == sorted((s for _, s in heavy), reverse=True)
