"""The feature layout: every feature's name, group and aggregation, the target constants the
features assume, and the log scaling. ``FEATURES.md`` documents each feature.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .expr_analysis import OPS

N_BUFFER_SLOTS = 5
CACHE_LINE_BYTES = 64
VECTOR_BYTES = 64
L1_SETS = 64  # a 32-48 KiB L1 data cache: 64 sets of 8-12 ways
L1_WAYS = 8
AI_SAMPLES = 10
# Capacities (bytes) at which memory traffic is estimated: about a register file, an L1, an
# L2 and a last-level cache slice.
TRAFFIC_CAPACITIES = (2048, 32 * 1024, 1024 * 1024, 16 * 1024 * 1024)

# (name, how program_features aggregates it: "sum" in linear space or "max")
COMPUTE_FEATURES = [(op, "sum") for op in OPS] + [("float_ops", "sum"),
                                                  ("body_float_ops", "max")]
LOOP_FEATURES = [
    ("vec_len", "max"), ("vec_num", "max"), ("vec_prod", "max"),
    ("vec_contiguous", "sum"), ("vec_broadcast", "sum"), ("vec_gather", "sum"),
    ("unroll_copies", "max"), ("auto_unroll_max_step", "max"),
    ("par_prod", "max"), ("par_num", "max"), ("par_depth", "max"), ("par_task_iters", "max"),
    ("gpu_blocks", "max"), ("gpu_threads", "max"), ("gpu_vthreads", "max"),
    ("inner_extent_0", "max"), ("inner_extent_1", "max"), ("inner_extent_2", "max"),
    ("inner_reduce_0", "max"), ("inner_reduce_1", "max"), ("inner_reduce_2", "max"),
    ("inner_contiguous_0", "sum"), ("inner_invariant_0", "sum"), ("inner_strided_0", "sum"),
    ("inner_contiguous_1", "sum"), ("inner_invariant_1", "sum"), ("inner_strided_1", "sum"),
    ("inner_contiguous_2", "sum"), ("inner_invariant_2", "sum"), ("inner_strided_2", "sum"),
    ("set_pressure_0", "max"), ("set_pressure_1", "max"),
    ("num_loops", "max"), ("outer_prod", "sum"), ("guards", "max"),
]
BUFFER_FIELDS = [
    "read", "write", "read_write", "local", "register", "shared", "bytes", "unique_bytes", "lines",
    "unique_lines", "reuse_loop", "reuse_serial", "reuse_none", "reuse_dis_iter",
    "reuse_dis_bytes", "reuse_ct", "stride_inner", "stride_nonzero",
]
_BUFFER_SUM = {"bytes", "unique_bytes", "lines", "unique_lines"}
BUFFER_FEATURES = [(f"buf{k}_{f}", "sum" if f in _BUFFER_SUM else "max")
                   for k in range(N_BUFFER_SLOTS) for f in BUFFER_FIELDS]
TRAFFIC_FEATURES = [(f"traffic_{cap // 1024}k", "sum") for cap in TRAFFIC_CAPACITIES] + [
    ("footprint_bytes", "sum")]
ESTIMATE_FEATURES = [
    ("simd_lanes", "max"), ("vec_explicit", "max"), ("vec_auto_inner", "max"),
    ("vec_auto_outer", "max"), ("vec_slp", "max"), ("acc_chains", "max"),
    ("acc_registers", "max"), ("conflict_misses", "sum"),
    ("est_compute_cycles", "sum"), ("est_latency_cycles", "sum"), ("est_memory_cycles", "sum"),
    ("est_overhead_cycles", "sum"), ("est_cycles", "sum"),
]
AI_FEATURES = [(f"ai_curve_{i}", "max") for i in range(AI_SAMPLES)]
ALLOC_FEATURES = [("alloc_bytes", "sum"), ("alloc_count", "max"), ("alloc_total_bytes", "sum"),
                  ("is_alloc", "max")]
PROGRAM_CONTEXT_FEATURES = [
    ("prog_sites", "max"), ("prog_stores", "max"), ("prog_loops", "max"), ("prog_allocs", "max"),
    ("prog_alloc_bytes", "max"), ("prog_float_ops", "max"), ("prog_bytes", "max"),
    ("prog_max_par", "max"), ("prog_est_cycles", "max"), ("prog_shared_bytes", "max"),
    ("prog_prefetches", "max"),
]
SPEC = (COMPUTE_FEATURES + LOOP_FEATURES + BUFFER_FEATURES + TRAFFIC_FEATURES
         + ESTIMATE_FEATURES + AI_FEATURES + ALLOC_FEATURES + PROGRAM_CONTEXT_FEATURES)
FEATURE_NAMES: list[str] = [name for name, _ in SPEC]
N_FEATURES = len(FEATURE_NAMES)
# Bump when what a feature means changes without its name changing: snapshots of models
# trained on other features are refused (``FEATURE_SET`` is stored in every snapshot).
FEATURES_VERSION = 3
FEATURE_SET = hashlib.sha256(
    f"{FEATURES_VERSION}:{','.join(FEATURE_NAMES)}".encode()).hexdigest()[:16]
SUM_MASK = np.array([agg == "sum" for _, agg in SPEC])  # aggregated by summing
N_SITE_FEATURES = N_FEATURES - len(PROGRAM_CONTEXT_FEATURES)
COLUMN = {name: i for i, name in enumerate(FEATURE_NAMES)}
# program_features: the row with the most float work, then every feature aggregated.
PROGRAM_FEATURE_NAMES: list[str] = ([f"main_{n}" for n in FEATURE_NAMES]
                                    + [f"all_{n}" for n in FEATURE_NAMES] + ["num_rows"])
N_PROGRAM_FEATURES = len(PROGRAM_FEATURE_NAMES)


def log2p(x: np.ndarray) -> np.ndarray:
    """``sign(x) * log2(1 + |x|)``: the scaling of every feature."""
    return np.sign(x) * np.log2(np.abs(x) + 1.0)


def inverse_log2p(x: np.ndarray) -> np.ndarray:
    """The inverse of ``log2p``."""
    return np.sign(x) * (np.exp2(np.abs(x)) - 1.0)
