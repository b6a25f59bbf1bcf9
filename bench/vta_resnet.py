"""ResNet-18's int8 convolutions on the simulated ``vta`` accelerator (the layers C1 to C11
of the TVM paper's VTA table), compiled from schedules by the vta code generator.

Per layer: simulated cycles of the default schedule (``VtaCompute.default_template``), of
the best schedule the vta sketch policy finds in ``--trials`` candidates without virtual
threads and with them, and the ideal (the layer's MACs / (BATCH x BLOCK_IN x BLOCK_OUT) per
cycle); GEMM-core utilisation = ideal / cycles; what limits the tuned program (the DRAM
port's busy cycles against the compute module's). Every program's output is checked
against numpy, exactly. Candidates are compiled and simulated in this process (what the
``vta`` device does in its sandbox). All figures are **simulated**
(``workers.vta.Simulator``, cycle-approximate), not measured on a board.

    .venv/bin/python bench/vta_resnet.py [--trials 48] [--layers C2,C6] [--preset pynq]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedule import ScheduleError, Target, Workload, vta
from search import SearchTask, VtaPolicy
from workers.vta import Simulator

#: name: (H = W, C, K, R = S, stride, padding), batch 1.
LAYERS = {
    "C1": (224, 3, 64, 7, 2, 3), "C2": (56, 64, 64, 3, 1, 1), "C3": (56, 64, 64, 1, 1, 0),
    "C4": (56, 64, 128, 3, 2, 1), "C5": (56, 64, 128, 1, 2, 0), "C6": (28, 128, 128, 3, 1, 1),
    "C7": (28, 128, 256, 3, 2, 1), "C8": (28, 128, 256, 1, 2, 0),
    "C9": (14, 256, 256, 3, 1, 1), "C10": (14, 256, 512, 3, 2, 1),
    "C11": (14, 256, 512, 1, 2, 0),
}
SHIFT = 9


def layer(name: str) -> Workload:
    hw, c, k, r, stride, pad = LAYERS[name]
    return Workload.op("conv2d_nchw", N=1, C=c, H=hw, W=hw, K=k, R=r, S=r, stride=stride,
                       padding=pad, dtype="int8", requant_shift=SHIFT)


class Bench:
    """One layer: its packed computation, inputs and expected output."""

    def __init__(self, workload: Workload, config: vta.VtaConfig):
        self.workload, self.config = workload, config
        self.compute = vta.VtaCompute(workload, config)
        inputs = workload.random_inputs(0)
        self.packed = self.compute.pack_inputs(inputs)
        (self.expected,) = workload.reference(inputs)

    def run(self, steps) -> tuple[int, dict] | None:
        """Simulated cycles and statistics of a schedule (None if it cannot run)."""
        try:
            _, program = vta.compile_workload(self.workload, steps, self.config)
        except ScheduleError:
            return None
        result = Simulator(self.config).run(program.instructions,
                                            program.dram_image(self.packed, self.config))
        out = self.compute.unpack_output(program.output(result.dram, self.config))
        if not np.array_equal(out, self.expected):
            raise AssertionError(f"{self.workload}: the output differs from numpy")
        return result.cycles, result.stats

    def tune(self, trials: int, max_vthreads: int) -> tuple[int, dict]:
        policy = VtaPolicy(SearchTask(self.workload, Target.vta()), seed=0,
                           max_vthreads=max_vthreads)
        best: tuple[int, dict] | None = None
        done = 0
        while done < trials:
            candidates = policy.propose(min(8, trials - done))
            if not candidates:
                break
            runs = [self.run(c.steps) for c in candidates]
            policy.notify(candidates, [None if r is None else self.config.seconds(r[0])
                                       for r in runs])
            for r in runs:
                if r is not None and (best is None or r[0] < best[0]):
                    best = r
            done += len(candidates)
        assert best is not None
        return best


def limit(stats: dict) -> str:
    return "DMA" if stats["dram_port_cycles"] >= stats["compute_busy_cycles"] else "compute"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=48)
    parser.add_argument("--layers", default=",".join(LAYERS))
    parser.add_argument("--preset", default="pynq", choices=tuple(vta.PRESETS))
    args = parser.parse_args()
    config = vta.VtaConfig.for_target(Target.vta(), args.preset)
    print(f"vta {config.batch}x{config.block_in}x{config.block_out}, {args.preset} "
          f"({config.clock_mhz:g} MHz, {config.bus_bytes} B/cycle DRAM port); "
          f"{args.trials} candidates per tuning; simulated cycles")
    print(f"{'layer':6} {'ideal':>9} {'default':>10} {'util':>6} {'tuned,1vt':>10} {'util':>6} "
          f"{'tuned,2vt':>10} {'util':>6} {'ms@clk':>7} {'limit':>7} {'s':>5}")
    for name in args.layers.split(","):
        start = time.perf_counter()
        bench = Bench(layer(name), config)
        ideal = bench.compute.macs / config.macs_per_cycle
        default = bench.run(bench.compute.template_steps(bench.compute.default_template()))
        plain = bench.tune(args.trials, max_vthreads=1)
        hidden = bench.tune(args.trials, max_vthreads=2)
        best = min(plain, hidden, key=lambda r: r[0])
        cells = [f"{name:6} {ideal:9.0f}"]
        for run in (default, plain, hidden):
            cells.append(f"{run[0]:10d} {100 * ideal / run[0]:5.1f}%" if run else
                         f"{'-':>10} {'-':>6}")
        cells.append(f"{1e3 * config.seconds(best[0]):7.3f} {limit(best[1]):>7} "
                     f"{time.perf_counter() - start:5.0f}")
        print(" ".join(cells), flush=True)


if __name__ == "__main__":
    main()
