"""Issue 12, finding 8: every numeric target option is bounded, so a target string from a
request cannot ask the generated code for absurd resources (``num_threads(1000000)``)."""

from __future__ import annotations

import pytest

from schedule.target import (
    MAX_CORES,
    MAX_SHARED_MEMORY_BYTES,
    MAX_VTA_DIM,
    Target,
    host_cores,
    host_cpu_target,
)


@pytest.mark.parametrize(("spec", "fragment"), [
    ("cpu -isa=avx2 -cores=1000000", f"-cores=1000000: must be in 1..{MAX_CORES}"),
    (f"cpu -isa=avx2 -cores={MAX_CORES + 1}", f"must be in 1..{MAX_CORES}"),
    ("cpu -cores=1000000", f"must be in 1..{MAX_CORES}"),  # the reported string
    ("cpu -isa=avx2 -cores=" + "9" * 5000, "too large"),
    ("cuda -arch=sm_90 -shared-memory-bytes=99999999",
     f"must be in 1..{MAX_SHARED_MEMORY_BYTES}"),
    ("cuda -arch=sm_90 -max-threads-per-block=4096", "1..1024"),
    ("cuda -arch=sm_" + "9" * 50, "sm_<1 to 4 digits>"),
    (f"vta -config=1x{2 * MAX_VTA_DIM}x16", f"powers of two up to {MAX_VTA_DIM}"),
    ("vta -config=1x" + "1" * 5000 + "x16", "BATCHxBLOCK_INxBLOCK_OUT"),
    ("cpu -isa=avx2 -cores=2 -vector-bits=4096", "between 64 and 2048"),
])
def test_absurd_target_options_are_refused(spec: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        Target.parse(spec)
    assert fragment in str(info.value)
    assert len(str(info.value)) < 400  # the message does not echo a huge value back


def test_the_bounds_hold_for_every_way_of_making_a_target() -> None:
    with pytest.raises(ValueError, match="-cores"):
        Target.cpu(isa="avx2", cores=MAX_CORES + 1)
    with pytest.raises(ValueError, match="-cores"):
        Target("cpu", {"isa": "avx2", "cores": 10**6})
    with pytest.raises(ValueError, match="-cores"):
        Target.parse("cpu -isa=avx2 -cores=2").with_options(cores=10**6)
    with pytest.raises(ValueError, match="-shared-memory-bytes"):
        Target.cuda("sm_90", shared_memory_bytes=MAX_SHARED_MEMORY_BYTES + 1)
    with pytest.raises(ValueError, match="-cores"):
        Target.from_json({"kind": "cpu", "string": "cpu -isa=avx2 -cores=1000000"})


def test_values_at_the_bounds_are_accepted() -> None:
    assert Target.parse(f"cpu -isa=avx2 -cores={MAX_CORES}").cores == MAX_CORES
    t = Target.parse(f"cuda -arch=sm_90 -shared-memory-bytes={MAX_SHARED_MEMORY_BYTES}")
    assert t.shared_memory_bytes == MAX_SHARED_MEMORY_BYTES
    big = MAX_VTA_DIM
    assert Target.parse(f"vta -config={big}x{big}x{big}").block_out == big


def test_host_cores_are_within_the_bound() -> None:
    assert 1 <= host_cores() <= MAX_CORES
    assert host_cpu_target().cores == host_cores()


def test_threads_cap_a_target_at_the_cores_available() -> None:
    t = Target.parse(f"cpu -isa=avx2 -cores={MAX_CORES}")
    assert t.threads(4) == 4
    assert t.threads() == host_cores()
    assert Target.parse("cpu -isa=avx2 -cores=2").threads(16) == 2


def test_check_cores_refuses_a_target_larger_than_the_machine() -> None:
    t = Target.parse("cpu -isa=avx2 -cores=64")
    t.check_cores(64)
    with pytest.raises(ValueError, match="needs 64 cores but this machine has 8"):
        t.check_cores(8)
    Target.parse("vta").check_cores(1)  # other kinds: nothing to check
