"""Latency hiding on the simulated ``vta`` accelerator: hand-written int8 matmul kernels
(``schedule.vta.matmul_kernel``) with the weights in one buffer (each tile's load waits for
the GEMMs of the tile before) and in two (loads overlap the other buffer's GEMMs, what a
virtual thread gives), on matmul shapes like the channel products of ResNet convolutions and
BERT's projections (the whole of A, the micro-ops and C stay on chip).

Prints, per shape: simulated cycles, the time at the preset's clock, GEMM-core utilisation
(core operations / cycles) against the ideal (MACs / (BATCH x BLOCK_IN x BLOCK_OUT)), and
what bounds it (the DRAM port's busy share). Every output is checked against numpy. All
figures are **simulated** (``workers.vta.Simulator``: cycle-approximate), not measured on a
board.

    .venv/bin/python bench/vta_overlap.py [--preset pynq|ultra96]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedule.vta import PRESETS, VtaConfig, matmul_kernel
from workers.vta import Simulator

#: (name, M, K, N): rows, reduction, output columns.
SHAPES = [
    ("64 rows, 64 -> 64 (a 1x1 conv's channels)", 64, 64, 64),
    ("32 rows, 576 -> 128 (a 3x3 conv by im2col)", 32, 576, 128),
    ("32 rows, 256 -> 512 (a 1x1 conv)", 32, 256, 512),
    ("16 rows, 768 -> 768 (BERT's projections)", 16, 768, 768),
    ("8 rows, 768 -> 1024 (a slice of BERT's FFN)", 8, 768, 1024),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="pynq", choices=tuple(PRESETS))
    args = parser.parse_args()
    config = VtaConfig.for_target("vta", args.preset)
    sim = Simulator(config)
    rng = np.random.default_rng(0)
    print(f"vta {config.batch}x{config.block_in}x{config.block_out}, {config.name}: "
          f"{config.clock_mhz:g} MHz, {config.bus_bytes * 8}-bit DRAM bus (SIMULATED)")
    print(f"{'M rows, K -> N':46} {'buffers':>7} {'cycles':>9} {'time':>10} {'GEMM util':>9} "
          f"{'ideal':>8} {'port busy':>9} {'speed-up':>8}")
    for name, m, k, n in SHAPES:
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        w = rng.integers(-128, 128, (n, k), dtype=np.int8)
        want = np.clip((a.astype(np.int64) @ w.astype(np.int64).T) >> 8, -128, 127)
        ideal = m * k * n / config.macs_per_cycle
        cycles = {}
        for buffers in (1, 2):
            kernel = matmul_kernel(a, w, config, 8, buffers)
            start = time.perf_counter()
            result = sim.run(kernel.program, kernel.dram)
            wall = time.perf_counter() - start
            if not np.array_equal(kernel.output(result.dram, config), want):
                raise SystemExit(f"{name}: the kernel's output differs from numpy")
            cycles[buffers] = result.cycles
            speedup = f"{cycles[1] / result.cycles:.2f}x" if buffers == 2 else ""
            print(f"{name:46} {buffers:>7} {result.cycles:>9} "
                  f"{result.seconds * 1e6:>8.1f}us {result.stats['gemm_utilization']:>9.1%} "
                  f"{ideal / result.cycles:>8.1%} "
                  f"{result.stats['dram_port_cycles'] / result.cycles:>9.1%} {speedup:>8}"
                  f"   ({wall:.2f} s to simulate)")
    print("GEMM util counts the resets too; ideal = MACs / (cycles x MACs per cycle).")


if __name__ == "__main__":
    main()
