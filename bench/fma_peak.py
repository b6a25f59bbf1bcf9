"""The machine's float32 FMA peak: independent AVX-512 (or AVX2) FMA chains on 1 and on all
cores, so tuned kernels can be reported as a fraction of what the hardware does.

    .venv/bin/python bench/fma_peak.py

Prints GFLOP/s with 1 thread and with one thread per core of the target. On a VM whose
vCPUs are SMT siblings of one physical core the two figures are the same.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from schedule import host_cpu_target
from schedule.build import c_compiler

_SOURCE = r"""
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define CHAINS 24
#define FMA _mm512_fmadd_ps
#define SET _mm512_set1_ps
#define SUM _mm512_reduce_add_ps
#else
typedef __m256 vec;
#define LANES 8
#define FMA _mm256_fmadd_ps
#define SET _mm256_set1_ps
static float SUM(vec v) { float t[8]; _mm256_storeu_ps(t, v); float s = 0;
                          for (int i = 0; i < 8; i++) s += t[i]; return s; }
/* 16 ymm registers: 12 chains and the two operands (24 chains spilled to memory: 128
   GFLOP/s against 199 on a 2-core AVX2 EPYC) */
#define CHAINS 12
#endif
int main(int argc, char** argv) {
  int threads = atoi(argv[1]);
  long iters = 100000000L;
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = omp_get_wtime();
    float sink = 0;
    #pragma omp parallel num_threads(threads) reduction(+:sink)
    {
      vec acc[CHAINS], b = SET(1.0000001f), c = SET(1e-9f);
      for (int i = 0; i < CHAINS; i++) acc[i] = SET((float)i);
      for (long it = 0; it < iters; it++) {
        #pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) acc[i] = FMA(acc[i], b, c);
      }
      for (int i = 0; i < CHAINS; i++) sink += SUM(acc[i]);
    }
    double seconds = omp_get_wtime() - t0;
    double gflops = 2.0 * iters * CHAINS * LANES * threads / seconds / 1e9;
    if (gflops > best) best = gflops;
    if (sink == 1.0f) printf(" ");
  }
  printf("%.1f\n", best);
  return 0;
}
"""


def fma_peak(threads: int) -> float:
    """Best of 5 runs of the FMA chains on ``threads`` threads, GFLOP/s."""
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "peak.c", Path(tmp) / "peak"
        src.write_text(_SOURCE)
        subprocess.run([c_compiler(), "-O2", "-march=native", "-fopenmp", str(src), "-o",
                        str(exe)], check=True)
        out = subprocess.run([str(exe), str(threads)], check=True, capture_output=True,
                             text=True).stdout
    return float(out.split()[-1])


def main() -> None:
    target = host_cpu_target()
    print(f"{target.canonical} ({target.model_name})")
    for threads in sorted({1, target.cores}):
        print(f"  FMA peak, {threads} thread(s): {fma_peak(threads):.0f} GFLOP/s")


if __name__ == "__main__":
    main()
