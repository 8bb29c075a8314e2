"""The pure-Python register checker: verdicts, counterexamples, and its work bounds."""

from __future__ import annotations

from spark_jobs.checker import (
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    UNKNOWN,
    CheckBudget,
    RegisterOp,
    check_register,
    check_rows,
    overall_verdict,
)


def w(op_id, value, invoke, complete):
    return RegisterOp(op_id, True, value, invoke, complete)


def r(op_id, value, invoke, complete):
    return RegisterOp(op_id, False, value, invoke, complete)


def test_it_accepts_sequential_writes_and_reads():
    history = [w(1, "a", 0, 10), r(2, "a", 11, 12), w(3, "b", 13, 20), r(4, "b", 21, 22)]
    assert check_register(history).verdict == LINEARIZABLE


def test_it_accepts_a_read_overlapping_a_write_returning_either_value():
    for seen in ("", "a"):
        assert check_register([w(1, "a", 0, 100), r(2, seen, 10, 20)]).verdict == LINEARIZABLE


def test_it_rejects_the_classic_stale_read_with_a_minimal_counterexample():
    history = [
        w(1, "a", 0, 10),
        w(2, "b", 20, 30),
        r(3, "a", 40, 50),
        r(4, "a", 12, 15),
        r(5, "b", 32, 35),
        w(6, "c", 60, 70),
        r(7, "c", 80, 90),
    ]
    result = check_register(history)
    assert result.verdict == NOT_LINEARIZABLE
    assert result.counterexample == (1, 2, 3)


def test_its_counterexample_is_itself_not_linearizable_and_one_minimal():
    history = [w(1, "a", 0, 10), w(2, "b", 20, 30), r(3, "a", 40, 50), r(4, "b", 45, 60)]
    result = check_register(history)
    kept = [o for o in history if o.op_id in result.counterexample]
    assert check_register(kept).verdict == NOT_LINEARIZABLE
    # One-minimal among sound removals: reads, and writes whose value no kept read returns
    # (dropping a write that a read depends on would invent a violation).
    reads = {o.value for o in kept if not o.is_write}
    for dropped in (o for o in kept if not o.is_write or o.value not in reads):
        smaller = [o for o in kept if o is not dropped]
        assert check_register(smaller).verdict == LINEARIZABLE


def test_it_orders_concurrent_overlapping_writes_either_way():
    history = [w(1, "a", 0, 100), w(2, "b", 10, 90), r(3, "b", 20, 30), r(4, "a", 95, 99)]
    assert check_register(history).verdict == LINEARIZABLE


def test_it_rejects_reads_that_see_overlapping_writes_flip_back():
    history = [
        w(1, "a", 0, 100),
        w(2, "b", 10, 90),
        r(3, "a", 20, 30),
        r(4, "b", 40, 50),
        r(5, "a", 60, 70),
    ]
    result = check_register(history)
    assert result.verdict == NOT_LINEARIZABLE
    assert result.counterexample == (1, 2, 3, 4, 5)


def test_a_write_that_timed_out_may_take_effect_late():
    history = [w(1, "a", 0, None), r(2, "", 10, 20), r(3, "a", 500, 510)]
    assert check_register(history).verdict == LINEARIZABLE


def test_it_reads_operation_rows_with_outcomes():
    rows = [
        {
            "op_id": 1,
            "kind": "register",
            "invoke_ms": 0,
            "complete_ms": 5,
            "outcome": "ok",
            "value": "a",
        },
        {
            "op_id": 2,
            "kind": "route_read",
            "invoke_ms": 10,
            "complete_ms": 12,
            "outcome": "not_found",
            "value": None,
        },
        {
            "op_id": 3,
            "kind": "route_read",
            "invoke_ms": 20,
            "complete_ms": 22,
            "outcome": "timeout",
            "value": "",
        },
    ]
    result = check_rows(rows)
    assert (result.verdict, result.counterexample) == (NOT_LINEARIZABLE, (1, 2))


def test_it_answers_unknown_when_the_budget_runs_out():
    # The budget bounds the search, which decides histories whose write values repeat
    # (each value is written twice here); unique values are decided without it (below).
    history = [w(i, str(i % 20), 0, 1000) for i in range(40)] + [r(99, "nobody", 1001, 1002)]
    result = check_register(history, budget=CheckBudget(max_steps=500))
    assert result.verdict == UNKNOWN
    too_many = check_register(history, budget=CheckBudget(max_ops=10))
    assert (too_many.verdict, too_many.steps) == (UNKNOWN, 0)


def test_unique_write_values_are_decided_whatever_the_budget():
    history = [w(i, str(i), 0, 1000) for i in range(40)] + [r(99, "nobody", 1001, 1002)]
    for budget in (CheckBudget(max_steps=500), CheckBudget(max_ops=10)):
        result = check_register(history, budget=budget)
        assert (result.verdict, result.counterexample) == (NOT_LINEARIZABLE, (99,)), budget


def test_the_overall_verdict_is_the_worst_topic():
    assert overall_verdict([LINEARIZABLE, UNKNOWN]) == UNKNOWN
    assert overall_verdict([UNKNOWN, NOT_LINEARIZABLE]) == NOT_LINEARIZABLE
    assert overall_verdict([LINEARIZABLE]) == LINEARIZABLE


def test_an_operation_stamped_as_completing_before_its_invocation_is_instantaneous():
    """Recorders on parallel probes can stamp such a row; the checker must not crash."""
    rows = [
        {
            "op_id": 1,
            "kind": "register",
            "outcome": "ok",
            "value": "A",
            "invoke_ms": 10,
            "complete_ms": 12,
        },
        {
            "op_id": 2,
            "kind": "register",
            "outcome": "ok",
            "value": "B",
            "invoke_ms": 30,
            "complete_ms": 29,
        },
        {
            "op_id": 3,
            "kind": "route_read",
            "outcome": "ok",
            "value": "B",
            "invoke_ms": 40,
            "complete_ms": 39,
        },
    ]
    assert check_rows(rows).verdict == LINEARIZABLE


def test_it_orders_by_microseconds_so_a_stale_read_300_us_after_an_ack_fails():
    """Route "b" is acknowledged at 100.400 ms and a read called at 100.700 ms still
    returns "a". In whole milliseconds both are [100, 100] and touch, so they would count
    as concurrent; the microsecond stamps put the read after the ack."""

    def row(op_id, kind, value, invoke_us, complete_us):
        return {
            "op_id": op_id,
            "kind": kind,
            "outcome": "ok",
            "value": value,
            "invoke_ms": invoke_us // 1000,
            "complete_ms": complete_us // 1000,
            "invoke_us": invoke_us,
            "complete_us": complete_us,
        }

    rows = [
        row(1, "register", "a", 90_000, 95_000),
        row(2, "register", "b", 100_100, 100_400),
        row(3, "route_read", "a", 100_700, 100_900),
    ]
    result = check_rows(rows)
    assert (result.verdict, result.counterexample) == (NOT_LINEARIZABLE, (1, 2, 3))
    in_milliseconds = [{**r, "invoke_us": None, "complete_us": None} for r in rows]
    assert check_rows(in_milliseconds).verdict == LINEARIZABLE
