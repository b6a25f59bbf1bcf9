"""Host drift: how much one compiled program's speed changes from one fresh process to
the next over minutes, beside numpy's in the same processes.

    .venv/bin/python bench/host_drift.py [--processes 20] [--gap 5] [--size 1024]

Each of ``--processes`` fresh Python processes, started ``--gap`` seconds apart, builds
the same GEMM (the hand-written packed register tile of ``schedule.examples``: what the
tuner's best programs on AVX2 look like) on aligned arrays, times it the way a worker
does (the native loop of ``Module.time``: three repeats of at least 100 ms, their median),
then times numpy's matmul on the same inputs (the median of the calls in 0.3 s). It prints
one line per process and, at the end, each contender's spread (slowest / fastest
process) and how often the two moved together.

Why it exists: on a shared VM the speed of a memory-heavy program can drift by tens of
percent over minutes (the host's last-level cache and memory are shared with other
tenants) while the VM's own CPU accounting sees nothing. A tuner that ranks programs by
one measurement each keeps whichever was measured in a fast minute. Run it with nothing
else on the machine; a spread well above the within-process one (``measure_stability``)
says the machine drifts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
import numpy as np
from bench.timing import median_call_time
from schedule import build
from schedule.examples import matmul_schedule
from schedule.buffers import aligned_empty

n = {size}
s, tensors = matmul_schedule(n, n, n, rows=4, cols=24, k_block=256)
mod = build(s, tensors)
rng = np.random.default_rng(0)
a, b, c = (aligned_empty((n, n), "float32") for _ in range(3))
a[...] = rng.random((n, n), dtype=np.float32)
b[...] = rng.random((n, n), dtype=np.float32)
mod(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-3)
ours = float(np.median(mod.time(a, b, c, number=1, repeat=3, min_repeat_ms=100)))
ref = median_call_time(lambda: a @ b, budget_s=0.3)
print(json.dumps({{"ours": ours, "numpy": ref}}))
"""


def one_process(size: int) -> dict[str, float]:
    """Seconds per call of the program and of numpy, timed in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT), size=size)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=20)
    parser.add_argument("--gap", type=float, default=5.0, help="seconds between processes")
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    if args.processes < 1 or args.size < 1 or args.gap < 0:
        parser.error("--processes and --size must be at least 1, --gap not negative")
    flops = 2 * args.size ** 3
    rows: list[dict[str, float]] = []
    print(f"GEMM {args.size}³, ms per call (GFLOP/s), one fresh process per line", flush=True)
    for n in range(args.processes):
        if n:
            time.sleep(args.gap)
        row = one_process(args.size)
        rows.append(row)
        print(f"{time.strftime('%H:%M:%S')}  ours {row['ours'] * 1e3:7.2f} "
              f"({flops / row['ours'] / 1e9:4.0f})   numpy {row['numpy'] * 1e3:7.2f} "
              f"({flops / row['numpy'] / 1e9:4.0f})", flush=True)
    for name in ("ours", "numpy"):
        values = [r[name] for r in rows]
        print(f"{name}: fastest {min(values) * 1e3:.2f} ms, median "
              f"{statistics.median(values) * 1e3:.2f}, slowest {max(values) * 1e3:.2f}: "
              f"spread {max(values) / min(values):.2f}x")
    if len(rows) > 2:
        together = statistics.correlation([r["ours"] for r in rows], [r["numpy"] for r in rows])
        print(f"correlation of the two across processes: {together:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
