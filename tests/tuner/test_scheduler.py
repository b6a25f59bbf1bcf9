"""The task scheduler: every task first, then where the weighted latency drops most."""

from __future__ import annotations

import math

import pytest

from tuner import TaskScheduler


def test_round_robin_cycles_over_active_tasks():
    sched = TaskScheduler([1, 1, 1], "round-robin")
    picks = [sched.next_task() for _ in range(6)]
    assert picks == [0, 1, 2, 0, 1, 2]
    sched.retire(1)
    assert [sched.next_task() for _ in range(4)] == [0, 2, 0, 2]


def test_gradient_tries_every_task_then_favours_the_costliest():
    sched = TaskScheduler([1.0, 1.0], "gradient", eps=0.0)
    first = [sched.next_task(), None]
    sched.record(first[0], 8, 1e-3)
    first[1] = sched.next_task()
    assert sorted(first) == [0, 1]
    sched.record(first[1], 8, 8e-3)  # task 1 is eight times slower
    assert sched.next_task() == first[1]


def test_gradient_weights_scale_the_choice():
    sched = TaskScheduler([10.0, 1.0], "gradient", eps=0.0)
    sched.record(0, 8, 1e-3)
    sched.record(1, 8, 4e-3)  # slower, but task 0 runs ten times as often
    assert sched.next_task() == 0


def test_a_task_that_keeps_improving_gets_trials():
    sched = TaskScheduler([1.0, 1.0], "gradient", eps=0.0, alpha=1.0)
    for best in (8e-3, 4e-3, 2e-3, 1e-3, 0.5e-3):
        sched.record(0, 8, best)
    for _ in range(5):
        sched.record(1, 8, 1e-3)  # stuck
    assert sched.next_task() == 0


def test_no_active_task_ends_the_job_and_unknown_strategies_are_refused():
    sched = TaskScheduler([1.0])
    sched.retire(0)
    assert sched.next_task() is None
    with pytest.raises(ValueError, match="unknown scheduler"):
        TaskScheduler([1.0], "fifo")


def test_each_choice_says_why() -> None:
    scheduler = TaskScheduler([1.0, 1.0], "gradient", eps=0.0)
    assert scheduler.next_task() == 0 and scheduler.reason.startswith("not tried yet")
    scheduler.record(0, 4, 2e-3)
    assert scheduler.next_task() == 1
    scheduler.record(1, 4, 1e-3)
    assert scheduler.expected_gains() == [scheduler.expected_gain(0), scheduler.expected_gain(1)]
    scheduler.next_task()
    assert scheduler.reason.startswith("the largest expected gain")
    scheduler.retire(0)
    assert scheduler.expected_gains()[0] is None
    failing = TaskScheduler([1.0], "gradient", eps=0.0)
    failing.next_task()
    failing.record(0, 4, math.inf)  # no valid program: a stand-in value, not shown
    assert failing.expected_gain(0) == 1.0 and failing.expected_gains() == [None]
    assert failing.next_task() == 0 and failing.reason.startswith("no valid program yet")


def test_first_batches_go_to_the_largest_weight_times_cost_first():
    # task 2 runs once but costs 10x; task 0 runs 3 times at 1x; task 1 once at 1x
    sched = TaskScheduler([3.0, 1.0, 1.0], "gradient", eps=0.0, costs=[1e-4, 1e-4, 1e-3])
    order = []
    for _ in range(3):
        order.append(sched.next_task())
        sched.record(order[-1], 8, 1e-3)
    assert order == [2, 0, 1]


@pytest.mark.parametrize("costs", [[1.0], [1.0, math.nan], [1.0, -1.0]])
def test_costs_must_be_one_finite_number_per_task(costs):
    with pytest.raises(ValueError, match="one per task"):
        TaskScheduler([1.0, 1.0], costs=costs)


def test_roofline_time_counts_the_bytes_of_a_matrix_vector_product():
    from schedule import Workload
    from tuner.scheduler import NOMINAL_BYTES_PER_S, NOMINAL_FLOPS, roofline_seconds

    gemv = Workload.op("matmul", M=1, N=1000, K=1280)
    gemm = Workload.op("matmul", M=256, N=256, K=256)
    weight_bytes = 1000 * 1280 * 4
    assert roofline_seconds(gemv) >= weight_bytes / NOMINAL_BYTES_PER_S
    assert roofline_seconds(gemm) == pytest.approx(2 * 256**3 / NOMINAL_FLOPS)
    # the GEMV has 13x fewer FLOPs than the GEMM yet the longer lower bound
    assert gemv.flops * 13 < gemm.flops and roofline_seconds(gemv) > roofline_seconds(gemm)
