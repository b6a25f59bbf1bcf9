"""Measurement stability: the coefficient of variation of repeated measurements of one
kernel through the local pool, and the pool's figure against independent timings of the
same compiled library from Python (``time.perf_counter`` around a ctypes call of its entry
point, and around the schedule layer's ``mod(a, b, c)``).

    .venv/bin/python bench/measure_stability.py [--size 512] [--rounds 10] [--calls 200]
                                                [--flush-bytes N]

The kernel is a 512x512x512 float32 GEMM with the hand-written 8x32 tile. Each round
measures it once through the pool (one ``MeasureResult``, summarised as the mean and as
the median of its ``repeat`` figures) and once with each independent timer (the mean
seconds per call over ``--calls`` calls), interleaved so that machine noise hits all
alike. Settings are the defaults of ``MeasureSettings`` (number=1, repeat=3,
min_repeat_ms=100).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import numpy as np

from schedule import Target, Workload, compile_schedule, make_schedule, te
from schedule.examples import schedule_matmul
from workers import LocalPool, MeasureInput, MeasureSettings


def handwritten_steps(workload: Workload) -> list[list]:
    """The hand-written 8x32 register-tile GEMM schedule (schedule.examples), as steps."""
    _, b, c = workload.tensors()
    s = te.create_schedule(c)
    schedule_matmul(s, b, c)
    return s.steps


def independent_timers(workload: Workload, steps: list[list], calls: int):
    """Build the same program in this process and time ``calls`` calls of it two ways: the
    schedule layer's ``mod(a, b, c)``, and a ctypes binding of our own to the library's
    entry point (no argument checks), each after ``calls // 10`` untimed warm-up calls.
    Returns both timers and the library path."""
    s, args = make_schedule(workload, steps)
    mod = compile_schedule(s, args, Target.parse("cpu")).load()
    a, b = workload.random_inputs(0)
    c = np.zeros(args[-1].shape, np.float32)
    mod(a, b, c)  # warm-up
    entry = getattr(ctypes.CDLL(str(mod.library_path)), mod.signature.entry)
    entry.argtypes = [ctypes.c_void_p] * 3
    entry.restype = ctypes.c_int32
    pointers = (a.ctypes.data, b.ctypes.data, c.ctypes.data)

    def timer(call):
        def once() -> float:
            for _ in range(calls // 10):  # warm-up, as the pool's timer has one
                call()
            start = time.perf_counter()
            for _ in range(calls):
                call()
            return (time.perf_counter() - start) / calls
        return once

    return timer(lambda: mod(a, b, c)), timer(lambda: entry(*pointers)), mod.library_path


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--flush-bytes", type=int, default=0,
                        help="cache flush between the pool's repeats (default: none)")
    args = parser.parse_args()
    workload = Workload.op("matmul", M=args.size, N=args.size, K=args.size)
    steps = handwritten_steps(workload)
    inp = MeasureInput(workload.to_json(), "cpu", steps)
    settings = MeasureSettings(flush_bytes=args.flush_bytes)
    module_timer, ctypes_timer, library = independent_timers(workload, steps, args.calls)
    series: dict[str, list[float]] = {"pool, mean of each result's repeats": [],
                                      "pool, median of each result's repeats": [],
                                      f"ctypes entry, perf_counter, {args.calls} calls": [],
                                      f"mod(a, b, c), perf_counter, {args.calls} calls": []}
    timed = list(series.values())
    with LocalPool(settings) as pool:
        [built] = pool.builder.build([inp])
        same = built.library == library.read_bytes()
        pool.measure([inp])  # start the processes, compute the reference
        for _ in range(args.rounds):
            [result] = pool.measure([inp])
            assert result.ok, result.error_msg
            timed[0].append(result.mean_cost)
            timed[1].append(statistics.median(result.costs))
            timed[2].append(ctypes_timer())
            timed[3].append(module_timer())
    gflop = workload.flops / 1e9
    print(f"GEMM {args.size} float32, hand-written 8x32 tile, {args.rounds} rounds, "
          f"settings {settings.timing()}")
    print(f"  the pool's library and the independently loaded one are byte-identical: {same}")
    for name, values in series.items():
        med = statistics.median(values)
        print(f"  {name:42s} median {med * 1e3:7.4f} ms  {gflop / med:6.1f} GFLOP/s  "
              f"CV {100 * cv(values):5.2f}%")
        print("    rounds (ms): " + " ".join(f"{v * 1e3:.3f}" for v in values))
    pool_median = statistics.median(timed[0])
    print(f"  pool (means) / ctypes entry, medians over the rounds: "
          f"{pool_median / statistics.median(timed[2]):.4f}; "
          f"pool / mod(...): {pool_median / statistics.median(timed[3]):.4f}")


if __name__ == "__main__":
    main()
