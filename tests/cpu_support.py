"""What the test host's CPU can run: tests that execute code built for a wider ISA than the
host's (AVX-512 kernels on an AVX2 machine) would die of an illegal instruction, taking the
whole test run with them, so they are skipped there and say why."""

from __future__ import annotations

import platform

import pytest

from schedule import host_cpu_target

X86 = platform.machine().lower() in ("x86_64", "amd64")
#: the host's float32 vector lanes: generated code computes wider vectors in pieces of this
LANES = host_cpu_target().vector_bits // 32
AVX512_HOST = X86 and host_cpu_target().isa == "avx512"
needs_avx512 = pytest.mark.skipif(not AVX512_HOST,
                                  reason="running AVX-512 code needs an AVX-512 host")
