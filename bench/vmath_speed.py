"""Speed of the generated vector math (exp, erf, tanh, sigmoid, log) against numpy and
PyTorch, element-wise over a 128x3072 float32 array on this machine's cores.

Each function is one kernel of ours (rows parallel, 16 lanes vectorized), timed by its own
loop (best of 5 repeats of at least 50 ms, over ``--rounds`` rounds), beside numpy's and
PyTorch's version of the same function timed from Python in the same rounds (numpy has no
erf: PyTorch's stands alone there). A copy kernel gives the memory traffic's share.
``--repo DIR`` times the code generator of another checkout instead (an older commit in a
git worktree, say), so two versions can be compared in turn on the same machine.

    .venv/bin/python bench/vmath_speed.py [--rounds 3] [--repo DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHAPE = (128, 3072)


def _ours(name: str, rounds: int) -> float:
    from schedule import build, te

    A = te.placeholder(SHAPE, name="A")
    fn = {"copy": lambda x: x * 1.0, "exp": te.exp, "erf": te.erf, "tanh": te.tanh,
          "sigmoid": te.sigmoid, "log": te.log}[name]
    B = te.compute(SHAPE, lambda i, j: fn(A[i, j]), name="B")
    s = te.create_schedule(B)
    i, j = s[B].op.axis
    _, lanes = s[B].split(j, factor=16)
    s[B].parallel(i)
    s[B].vectorize(lanes)
    mod = build(s, [A, B])
    x = _input(name)
    out = np.zeros_like(x)
    mod(x, out)
    return min(min(mod.time(x, out, repeat=5, min_repeat_ms=50)) for _ in range(rounds))


def _input(name: str) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal(SHAPE).astype("float32")
    return np.abs(x) + 1e-3 if name == "log" else x


def _python_seconds(fn: Callable[[], object], rounds: int) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds * 5):
        start = time.perf_counter()
        for _ in range(20):
            fn()
        best = min(best, (time.perf_counter() - start) / 20)
    return best


def _libraries(name: str, rounds: int) -> tuple[float | None, float | None]:
    x = _input(name)
    numpy_fn = {"copy": lambda: x * 1.0, "exp": lambda: np.exp(x),
                "tanh": lambda: np.tanh(x), "sigmoid": lambda: 1.0 / (1.0 + np.exp(-x)),
                "log": lambda: np.log(x)}.get(name)
    try:
        import torch
    except ImportError:
        return (_python_seconds(numpy_fn, rounds) if numpy_fn else None), None
    t = torch.from_numpy(x)
    torch_fn = {"copy": lambda: t * 1.0, "exp": lambda: torch.exp(t),
                "erf": lambda: torch.erf(t), "tanh": lambda: torch.tanh(t),
                "sigmoid": lambda: torch.sigmoid(t), "log": lambda: torch.log(t)}[name]
    return (_python_seconds(numpy_fn, rounds) if numpy_fn else None,
            _python_seconds(torch_fn, rounds))


def _us(seconds: float | None) -> str:
    return f"{seconds * 1e6:.1f}" if seconds else "-"


def _ratio(theirs: float | None, ours: float) -> str:
    return f"{theirs / ours:.2f}x" if theirs else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repo", type=Path, default=ROOT,
                        help="the checkout whose code generator is timed (default: this one)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo.resolve()))
    from schedule import host_cpu_target

    print(f"{host_cpu_target()}; {SHAPE[0]}x{SHAPE[1]} float32; code generator of "
          f"{args.repo.resolve()}; us per call")
    print("| function | ours | numpy | PyTorch | ours vs numpy | ours vs PyTorch |")
    print("|---|---|---|---|---|---|")
    for name in ("copy", "exp", "erf", "tanh", "sigmoid", "log"):
        ours = _ours(name, args.rounds)
        numpy_s, torch_s = _libraries(name, args.rounds)
        print(f"| {name} | {ours * 1e6:.1f} | {_us(numpy_s)} | {_us(torch_s)} | "
              f"{_ratio(numpy_s, ours)} | {_ratio(torch_s, ours)} |")


if __name__ == "__main__":
    main()
