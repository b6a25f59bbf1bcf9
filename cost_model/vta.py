"""A cost model for ``vta`` programs: features of an accelerator schedule and an XGBoost
regression of its measured cycles on them.

The features are the quantities that decide an accelerator program's time (see the
simulator in ``workers.vta``): the bytes each DMA stream moves and the DRAM port's share of
them, the GEMM core's work and the ALU's, the instruction count, how many loads each tile
needs, the buffers' fill, and whether virtual threads let loads overlap compute. They come
from the schedule template (``schedule.vta.Template``) analytically — no code generation —
so a policy can score every point of the space. ``analytic_cycles`` combines them into a
roofline estimate (DMA and compute summed, or overlapped with two virtual threads), which
ranks programs before any is measured; the model learns the correction from measurements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from schedule import vta

VTA_FEATURE_NAMES = (
    "log_tile_m", "log_tile_n", "log_tile_k", "log_tile_h", "log_tile_w", "vthreads",
    "vthread_over_m", "vthread_over_h",
    "log_inp_bytes", "log_wgt_bytes", "log_out_bytes", "log_dma_cycles", "log_compute_cycles",
    "log_instructions", "log_loads", "dma_over_compute", "log_analytic_cycles",
    "inp_fill", "wgt_fill", "acc_fill", "log_k_steps", "log_out_tiles",
)
_MIN_TRAIN = 6


def _log(x: float) -> float:
    return math.log2(max(x, 1.0))


def template_facts(t: vta.Template, shape: vta.GemmShape,
                   config: vta.VtaConfig) -> dict[str, float]:
    """Analytic facts of template ``t`` on a computation of ``shape`` (in core blocks)."""
    g = shape
    out_tiles = (g.m // t.tile_m) * (g.n // t.tile_n) * (g.h // t.tile_h) * (g.w // t.tile_w)
    k_steps = g.k // t.tile_k
    steps = out_tiles * k_steps
    rows, cols = g.input_rows(t.tile_h), g.input_rows(t.tile_w)
    inp = steps * t.tile_m * t.tile_k * rows * cols * config.inp_entry_bytes
    wgt = steps * t.tile_n * t.tile_k * g.r * g.s * config.wgt_entry_bytes
    out = g.m * g.n * g.h * g.w * config.out_entry_bytes
    loads = steps * (t.tile_m * t.tile_k + 1)
    opened = steps * (t.tile_m * t.tile_k * rows + t.tile_n * t.tile_k * g.r * g.s)
    dma = (inp + wgt + out) / config.bus_bytes + 2 * opened + config.dma_latency * (
        loads + out_tiles)
    outputs = g.m * g.n * g.h * g.w
    gemm = outputs * (g.k * g.r * g.s + 1)  # core operations, with the resets
    instructions = out_tiles * (k_steps * (t.tile_m * t.tile_k + 2) + 5) + 2
    compute = gemm + 3 * outputs + instructions
    cycles = max(dma, compute) + min(dma, compute) * (0.15 if t.vthreads > 1 else 1.0)
    lanes = t.vthreads
    return {
        "inp_bytes": inp, "wgt_bytes": wgt, "out_bytes": out, "dma_cycles": dma,
        "compute_cycles": compute, "instructions": instructions, "loads": loads,
        "analytic_cycles": cycles, "out_tiles": out_tiles, "k_steps": k_steps,
        "inp_fill": lanes * t.tile_m * t.tile_k * rows * cols / config.inp_depth,
        "wgt_fill": lanes * t.tile_n * t.tile_k * g.r * g.s / config.wgt_depth,
        "acc_fill": lanes * t.tile_m * t.tile_n * t.tile_h * t.tile_w / config.acc_depth,
    }


def vta_features(t: vta.Template, shape: vta.GemmShape,
                 config: vta.VtaConfig) -> np.ndarray:
    """The feature row of template ``t`` (``VTA_FEATURE_NAMES``)."""
    f = template_facts(t, shape, config)
    return np.asarray([
        _log(t.tile_m), _log(t.tile_n), _log(t.tile_k), _log(t.tile_h), _log(t.tile_w),
        t.vthreads, float(t.vthread_axis == "m" and t.vthreads > 1),
        float(t.vthread_axis == "h" and t.vthreads > 1),
        _log(f["inp_bytes"]), _log(f["wgt_bytes"]), _log(f["out_bytes"]),
        _log(f["dma_cycles"]), _log(f["compute_cycles"]), _log(f["instructions"]),
        _log(f["loads"]), f["dma_cycles"] / f["compute_cycles"], _log(f["analytic_cycles"]),
        f["inp_fill"], f["wgt_fill"], f["acc_fill"], _log(f["k_steps"]), _log(f["out_tiles"]),
    ], dtype=np.float32)


class VtaCostModel:
    """XGBoost regression of log2(measured seconds) on :func:`vta_features`; before it has
    ``_MIN_TRAIN`` measurements, the analytic estimate. ``predict`` returns scores, higher
    = predicted faster."""

    def __init__(self, seed: int = 0, num_rounds: int = 60):
        self.seed = seed
        self.num_rounds = num_rounds
        self._rows: list[np.ndarray] = []
        self._labels: list[float] = []
        self._booster: Any = None

    def update(self, rows: Sequence[np.ndarray], seconds: Sequence[float | None]) -> None:
        """Add measured programs (None: failed, not learned from) and retrain."""
        for row, cost in zip(rows, seconds, strict=True):
            if cost is not None and cost > 0 and math.isfinite(cost):
                self._rows.append(row)
                self._labels.append(math.log2(cost))
        if len(self._rows) >= _MIN_TRAIN:
            import xgboost as xgb

            data = xgb.DMatrix(np.stack(self._rows), label=np.asarray(self._labels))
            params = {"max_depth": 3, "eta": 0.2, "subsample": 1.0, "seed": self.seed,
                      "nthread": 1, "objective": "reg:squarederror"}
            self._booster = xgb.train(params, data, self.num_rounds)

    def predict(self, rows: Sequence[np.ndarray]) -> np.ndarray:
        if not rows:
            return np.zeros(0)
        matrix = np.stack(rows)
        if self._booster is None:
            return -matrix[:, VTA_FEATURE_NAMES.index("log_analytic_cycles")]
        import xgboost as xgb

        return -self._booster.predict(xgb.DMatrix(matrix))
