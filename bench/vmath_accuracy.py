"""Exhaustive accuracy of the generated code's vector math (``schedule.vmath``): every one
of the 2^32 float32 inputs through the 16-lane version, against glibc's float64 functions,
compiled with the flags this machine's kernels get. Prints each function's largest error in
ulps (where the result is finite; infinite and NaN results must match exactly) beside the
bound ``vmath.ULP_BOUNDS`` states.

    .venv/bin/python bench/vmath_accuracy.py [--step 1] [--jobs 2]

About two minutes per function per core at ``--step 1``; ``--step 97`` samples every 97th
input for a quick look.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_REFERENCE = {"exp": "exp(x)", "log": "log(x)", "tanh": "tanh(x)", "erf": "erf(x)",
              "sigmoid": "1.0 / (1.0 + exp(-x))"}

_MAIN = r"""
static double reference(double x) { return %(reference)s; }

int main(int argc, char** argv) {
  uint64_t step = strtoull(argv[1], 0, 10);
  double worst = 0.0; float worst_x = 0.0f; long mismatched = 0;
  for (uint64_t b = 0; b < (1ull << 32); b += 16 * step) {
    vf x;
    for (int l = 0; l < 16; ++l) { uint32_t u = (uint32_t)(b + l * step); memcpy(&x[l], &u, 4); }
    vf y = tt_v%(name)s_f32x16(x);
    for (int l = 0; l < 16; ++l) {
      double want = reference((double)x[l]);
      float want32 = (float)want;
      if (isnan(want) || isinf(want32)) {
        if (isnan(want) ? !isnan(y[l]) : y[l] != want32) ++mismatched;
        continue;
      }
      if (!isfinite(y[l])) { ++mismatched; continue; }
      int e;
      frexp(want32 == 0.0f ? 0x1p-149 : want32, &e);
      double ulp = ldexp(1.0, e - 24);
      if (ulp < 0x1p-149) ulp = 0x1p-149;
      double err = fabs((double)y[l] - want) / ulp;
      if (err > worst) { worst = err; worst_x = x[l]; }
    }
  }
  printf("%%.4f %%.9g %%ld\n", worst, worst_x, mismatched);
  return 0;
}
"""


def checker_source(name: str) -> str:
    from schedule import vmath

    parts = ["#include <math.h>", "#include <stdint.h>", "#include <stdio.h>",
             "#include <stdlib.h>", "#include <string.h>",
             "typedef float vf __attribute__((vector_size(64), aligned(4)));",
             "typedef int32_t vi __attribute__((vector_size(64), aligned(4)));"]
    parts += [text for _, text in vmath.definitions(name, "vf", "vi", "f32x16", 16)]
    parts.append(_MAIN % {"reference": _REFERENCE[name], "name": name})
    return "\n".join(parts)


def check(name: str, step: int, workdir: Path) -> tuple[float, float, int]:
    from schedule import Target
    from schedule.build import c_compiler

    source = workdir / f"{name}.c"
    binary = workdir / name
    source.write_text(checker_source(name))
    flags = ["-O3", "-std=gnu11", "-fno-math-errno", *Target.parse("cpu").compiler_flags()]
    subprocess.run([c_compiler(), *flags, str(source), "-o", str(binary), "-lm"], check=True)
    out = subprocess.run([str(binary), str(step)], check=True, capture_output=True,
                         text=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=int, default=1, help="check every STEP-th input")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()

    from schedule import vmath

    print(f"every {args.step} of 2^32 float32 inputs, 16 lanes")
    print(f"{'function':10} {'worst ulp':>10} {'bound':>7}  {'at x':>16}  inf/nan mismatches")
    failed = False
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        results = pool.map(lambda n: (n, check(n, args.step, Path(tmp))), vmath.FUNCTIONS)
        for name, (worst, at, mismatched) in results:
            bound = vmath.ULP_BOUNDS[name]
            failed |= worst > bound or mismatched > 0
            print(f"{name:10} {worst:10.3f} {bound:7.2f}  {at:16.9g}  {mismatched}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
