"""int8 convolutions on the CPU: where the CPU has AVX-512 VNNI, the search chooses the
programs tensorized with its dot product (the plain int8 tilings are candidates too), and
the best program matches numpy exactly."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest

from db import Database
from schedule import Workload
from tuner import build_best, tune

X86 = platform.machine().lower() in ("x86_64", "amd64")
HAS_VNNI = X86 and "avx512_vnni" in Path("/proc/cpuinfo").read_text()
CONV = Workload.op("conv2d_nchw4c_int8", N=1, C=32, H=14, W=14, K=32, R=3, S=3, padding=1)


@pytest.mark.skipif(not HAS_VNNI, reason="this CPU has no AVX-512 VNNI")
def test_the_search_chooses_the_vnni_dot_product(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'int8.db'}")
    result = tune(CONV, "cpu", trials=16, db=db, batch_size=8)
    assert result.status == "succeeded"
    records = [r for r in db.query_records(job_id=result.job_id) if r.ok]

    def tensorized(steps: list) -> bool:
        return any(step[0] == "tensorize" for step in steps)

    assert any(not tensorized(r.steps) for r in records)  # both kinds were measured
    best = min(records, key=lambda r: r.median_cost)
    assert tensorized(best.steps) and "x86_dot_u8i8_16x4" in str(best.steps)
    plain = [r.median_cost for r in records if not tensorized(r.steps)]
    assert best.median_cost < min(plain)
    module = build_best(CONV, "cpu", db)
    assert "_mm512_dpbusd_epi32" in module.source
    inputs = CONV.random_inputs(4)
    (expected,) = CONV.reference(inputs)
    out = np.zeros_like(expected)
    module(*inputs, out)
    np.testing.assert_array_equal(out, expected)
