"""Tuning for a GPU target end to end: the sketch search proposes GPU programs, the opencl
device (PoCL) checks and times them, the records keep the target, and the best program
rebuilt from the database computes the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from db import Database
from schedule import Workload
from tests.gpu_support import POCL, needs_pocl
from tuner import build_best, default_steps, tune

MATMUL = Workload.op("matmul", M=64, N=64, K=64)


@needs_pocl
def test_a_matmul_tunes_on_opencl_and_its_best_program_is_correct(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'gpu.db'}")
    result = tune(MATMUL, POCL, trials=8, db=db, batch_size=4)
    assert result.status == "succeeded"
    records = db.query_records(job_id=result.job_id)
    good = [r for r in records if r.ok]
    assert good and all(r.target == POCL for r in records)
    assert all(any(step[0] == "bind" for step in r.steps) for r in good)
    module = build_best(MATMUL, POCL, db)
    inputs = MATMUL.random_inputs(3)
    (expected,) = MATMUL.reference(inputs)
    out = np.zeros_like(expected)
    module(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_the_untuned_default_for_a_gpu_binds_every_stage() -> None:
    steps = default_steps(Workload.op("softmax", M=8, N=50), "cuda -arch=sm_90")
    assert any(step[0] == "bind" and step[3] == "threadIdx.x" for step in steps)
