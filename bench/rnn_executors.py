"""The generative RNN of the IR (input and hidden size 128, 32 steps) on tensortune's
executors against a PyTorch eager loop and a numpy loop, all in one run; and what each
executor adds per call on a small static model.

Contenders for the RNN (every output checked against the numpy loop):
- VM: the recursive ``@generate`` program (if, cons cells, recursion) on the virtual
  machine (``ir.backend.vm``): ``@cell``, a static function, runs as one native call, the
  loop counter's 0-d arithmetic on the host;
- AOT cell: the RNN cell compiled ahead of time (``aot_compile``: one native call a step),
  stepped by a Python loop; graph cell: the same with the graph executor;
- PyTorch eager: the cell as torch ops in a Python loop (1 and 2 threads); numpy loop.

Kernels use the untuned default schedules (``tuner.default_steps``), or with ``--tune N``
the best records after tuning the cell's tasks with N trials into ``--db``
(``tuner.tune``).

    .venv/bin/python bench/rnn_executors.py [--tune 256 --db sqlite:///bench-rnn.db]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZE, STEPS = 128, 32


def best_of(fn: Callable[[], Any], repeat: int = 200, budget_s: float = 5.0) -> float:
    """The median of up to ``repeat`` calls (after warm-up), in seconds."""
    for _ in range(3):
        fn()
    times: list[float] = []
    while len(times) < repeat and sum(times) < budget_s:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cell_module() -> Any:
    """``@main(input, hidden, w_ih, w_hh, b, w_ho) -> (output, new hidden)``: one step."""
    import ir

    t = ir.TensorType
    x, h = ir.var("input", t((1, SIZE), "float32")), ir.var("hidden", t((1, SIZE), "float32"))
    w_ih, w_hh = ir.var("w_ih", t((SIZE, SIZE), "float32")), ir.var("w_hh", t((SIZE, SIZE),
                                                                             "float32"))
    b, w_ho = ir.var("b", t((SIZE,), "float32")), ir.var("w_ho", t((SIZE, SIZE), "float32"))
    h2 = ir.op.tanh(ir.op.add(ir.op.add(ir.op.nn.dense(x, w_ih), ir.op.nn.dense(h, w_hh)), b))
    new_h = ir.var("new_hidden")
    body = ir.Let(new_h, h2, ir.Tuple([ir.op.nn.dense(new_h, w_ho), new_h]))
    return ir.Module({"main": ir.Function([x, h, w_ih, w_hh, b, w_ho], body)})


def stepper(step: Callable[..., Any], args: dict[str, np.ndarray]) -> Callable[[], list]:
    weights = [args[k] for k in ("w_ih", "w_hh", "b", "w_ho")]

    def run() -> list:
        x, h, outs = args["input"], args["hidden"], []
        for _ in range(STEPS):
            x, h = step(x, h, *weights)
            outs.append(x)
        return outs
    return run


def torch_loop(args: dict[str, np.ndarray]) -> Callable[[], list]:
    import torch

    x0, h0 = torch.from_numpy(args["input"]), torch.from_numpy(args["hidden"])
    w_ih, w_hh, b, w_ho = (torch.from_numpy(args[k]) for k in ("w_ih", "w_hh", "b", "w_ho"))

    def run() -> list:
        x, h, outs = x0, h0, []
        with torch.no_grad():
            for _ in range(STEPS):
                h = torch.tanh(torch.nn.functional.linear(x, w_ih) +
                               torch.nn.functional.linear(h, w_hh) + b)
                x = torch.nn.functional.linear(h, w_ho)
                outs.append(x)
        return outs
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tune", type=int, default=0, metavar="TRIALS")
    parser.add_argument("--db", default=None, help="records for the kernels (with --tune: "
                        "where tuning writes them)")
    args_ns = parser.parse_args()
    import torch

    import ir
    import tuner
    from ir.backend import VirtualMachine, aot_compile, build, vm
    from tests.ir.test_rnn_example import inputs, numpy_generate, rnn_module, to_list

    schedules = None
    if args_ns.tune or args_ns.db:
        db = args_ns.db or "sqlite:///bench-rnn.db"
        if args_ns.tune:
            tasks = ir.extract_tasks(rnn_module(SIZE, SIZE)) + ir.extract_tasks(cell_module())
            unique = {t.workload.key: t for t in tasks}
            start = time.perf_counter()
            tuner.tune([t.workload for t in unique.values()], "cpu", args_ns.tune, db=db,
                       weights=[t.weight for t in unique.values()])
            print(f"tuned {len(unique)} tasks, {args_ns.tune} trials, in "
                  f"{time.perf_counter() - start:.0f} s")
        schedules = tuner.best_schedules(db, "cpu")

    args = inputs(0, SIZE, SIZE, STEPS)
    want = numpy_generate(*args.values())
    kernels = {"schedules": schedules,
               "default_schedule": lambda wl: tuner.default_steps(wl, "cpu")}
    machine = VirtualMachine(vm.compile(rnn_module(SIZE, SIZE), "cpu", **kernels))
    aot = aot_compile(cell_module(), "cpu", **kernels)
    graph = build(cell_module(), "cpu", **kernels)
    contenders: dict[str, Callable[[], Any]] = {
        "VM (whole recursive program)": lambda: to_list(machine(**args)),
        "AOT cell + Python loop": stepper(aot, args),
        "graph-executor cell + Python loop": stepper(graph, args),
        "numpy loop": lambda: numpy_generate(*args.values()),
    }
    for run in contenders.values():
        got = run()
        assert len(got) == STEPS
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    timings = {name: best_of(run) for name, run in contenders.items()}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        run = torch_loop(args)
        for a, b in zip(run(), want, strict=True):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-4, atol=1e-5)
        timings[f"PyTorch eager loop ({threads} thread{'s' * (threads > 1)})"] = best_of(run)

    eager = min(v for k, v in timings.items() if k.startswith("PyTorch"))
    print(f"generative RNN: input = hidden = {SIZE}, {STEPS} steps, batch 1; kernels "
          f"{'tuned where --db has records' if schedules else 'untuned'} (else the "
          "analytic default schedule)")
    print(f"{'contender':38} {'per run':>10} {'per step':>10}  vs best PyTorch eager")
    for name, seconds in timings.items():
        print(f"{name:38} {seconds * 1e3:8.3f} ms {seconds / STEPS * 1e6:7.1f} us  "
              f"{eager / seconds:6.2f}x")
    machine.stats.reset()
    machine(**args)
    stats = machine.stats
    print(f"VM per run: {stats.instructions} instructions, {stats.native_calls} native calls "
          f"(the cell), {stats.kernel_calls} kernel calls, {stats.scalar_calls} scalar calls "
          f"on the host, {stats.fallback_calls} JIT fallbacks")

    print()
    print("per-call cost of one cell step (5 fused kernels: dense, dense+add+tanh, ...):")
    x, h = args["input"], args["hidden"]
    weights = [args[k] for k in ("w_ih", "w_hh", "b", "w_ho")]
    aot_call = best_of(lambda: aot(x, h, *weights), 2000)
    graph_call = best_of(lambda: graph(x, h, *weights), 2000)
    graph_run = best_of(graph.runtime.run, 2000)
    cell_vm = VirtualMachine(vm.compile(cell_module(), "cpu", **kernels))
    vm_call = best_of(lambda: cell_vm(x, h, *weights), 2000)
    for name, seconds in (("AOT call (inputs in, outputs out)", aot_call),
                          ("graph executor call", graph_call),
                          ("graph executor run() alone (no copies)", graph_run),
                          ("VM call", vm_call)):
        print(f"  {name:42} {seconds * 1e6:8.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
