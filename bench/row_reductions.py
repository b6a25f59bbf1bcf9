"""Row-wise reductions and vector math: softmax, log_softmax, layer_norm and GELU (erf)
tuned from an empty database, then re-timed in this process beside numpy and PyTorch on
the same data, in interleaved rounds; their bandwidth is compared with this machine's
STREAM triad, measured here with a kernel of our own.

    .venv/bin/python bench/row_reductions.py [--trials 64] [--rounds 5]

GB/s count the bytes a kernel must move at the least (each input read once, each output
written once). The rows here fit in the caches, so a kernel may beat the triad's DRAM
figure; the triad column shows how far from memory speed the kernel is. Times are from
Python calls for every contender (a call of ours checks its arguments: a few
microseconds); "native" is our kernel timed by its own loop. Run it with nothing else on
the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import median_call_time  # noqa: E402

TRIAD_ELEMENTS = 1 << 24  # three arrays of 64 MiB: far beyond the caches


def triad_gbs() -> float:
    """a = b + 3 c over 64 MiB arrays, parallel and vectorized (STREAM's triad)."""
    from schedule import build, te

    n = TRIAD_ELEMENTS
    b = te.placeholder((n,), "float32", name="b")
    c = te.placeholder((n,), "float32", name="c")
    a = te.compute((n,), lambda i: b[i] + 3.0 * c[i], name="a")
    s = te.create_schedule(a)
    outer, inner = s[a].split(a.op.axis[0], factor=64)
    s[a].parallel(outer)
    s[a].vectorize(inner)
    mod = build(s, [b, c, a])
    arrays = [np.ones(n, np.float32), np.ones(n, np.float32), np.empty(n, np.float32)]
    seconds = min(mod.time(*arrays, repeat=5, min_repeat_ms=100))
    return 3 * 4 * n / seconds / 1e9


def cases():
    """name -> (workload, numpy function, PyTorch function) over the workload's inputs."""
    import torch

    from schedule import Workload, ops, te

    def np_softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def np_log_softmax(x):
        shifted = x - x.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))

    def np_layer_norm(x, g, b):
        mean = x.mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * g + b

    def gelu_workload(m: int, n: int) -> Workload:
        x = te.placeholder((m, n), "float32", name="x")
        return Workload.from_tensors([ops.gelu(x)], name="gelu")

    from math import sqrt

    from scipy import special

    return {
        "softmax 128x3072": (Workload.op("softmax", M=128, N=3072), np_softmax,
                             lambda x: torch.softmax(x, -1)),
        "softmax 256x1000": (Workload.op("softmax", M=256, N=1000), np_softmax,
                             lambda x: torch.softmax(x, -1)),
        "log_softmax 128x1000": (Workload.op("log_softmax", M=128, N=1000), np_log_softmax,
                                 lambda x: torch.log_softmax(x, -1)),
        "layer_norm 128x768": (Workload.op("layer_norm", M=128, N=768), np_layer_norm,
                               lambda x, g, b: torch.nn.functional.layer_norm(
                                   x, (x.shape[-1],), g, b)),
        "gelu (erf) 128x3072": (gelu_workload(128, 3072),
                                lambda x: 0.5 * x * (1 + special.erf(x / np.float32(sqrt(2)))),
                                lambda x: torch.nn.functional.gelu(x)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import torch

    from tuner import build_best, tune

    torch.set_num_threads(2)
    triad = triad_gbs()
    print(f"STREAM triad (our kernel, 2 threads, 3 x 64 MiB): {triad:.1f} GB/s")
    print(f"{args.trials} trials per workload; median of {args.rounds} interleaved rounds")
    print(f"{'workload':22} {'ours':>9} {'native':>9} {'numpy':>9} {'PyTorch':>9}   "
          f"GB/s (of triad)   /numpy  /PyTorch  tune s/trial")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, (wl, np_fn, torch_fn)) in enumerate(cases().items()):
            db = f"sqlite:///{Path(tmp) / f'{i}.db'}"
            start = time.perf_counter()
            tune([wl], "cpu", args.trials, db=db)
            per_trial = (time.perf_counter() - start) / args.trials
            module = build_best(wl, "cpu", db)
            inputs = wl.random_inputs(seed=0)
            (want,) = wl.reference(inputs)
            out = np.zeros_like(want)
            module(*inputs, out)
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(np_fn(*inputs), want, rtol=1e-4, atol=1e-5)
            tensors = [torch.from_numpy(a) for a in inputs]
            with torch.no_grad():
                np.testing.assert_allclose(torch_fn(*tensors).numpy(), want, rtol=1e-4,
                                           atol=1e-5)
                calls = [lambda m=module, a=inputs, o=out: m(*a, o),
                         lambda f=np_fn, a=inputs: f(*a),
                         lambda f=torch_fn, t=tensors: f(*t)]
                rounds = [[median_call_time(c, 0.5, 500) for c in calls]
                          for _ in range(args.rounds)]
            native = min(module.time(*inputs, out, repeat=5, min_repeat_ms=50))
            ours, t_np, t_torch = (statistics.median(r[j] for r in rounds) for j in range(3))
            moved = sum(a.nbytes for a in inputs) + out.nbytes
            gbs = moved / native / 1e9
            print(f"{name:22} {ours * 1e3:7.3f}ms {native * 1e3:7.3f}ms {t_np * 1e3:7.3f}ms "
                  f"{t_torch * 1e3:7.3f}ms   {gbs:6.1f} ({gbs / triad:4.2f}x)    "
                  f"{t_np / ours:6.2f}x {t_torch / ours:7.2f}x   {per_trial:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
