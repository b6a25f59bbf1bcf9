"""Tests for schedule.target: canonical strings, parsing errors, host detection, flags."""

from __future__ import annotations

import os
import pickle
import platform
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import schedule.target as target_mod
from schedule.target import CPU_ISA_ENV, CPU_ISAS, Target, host_cpu_target


@pytest.fixture(autouse=True)
def _no_isa_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CPU_ISA_ENV, raising=False)


# --- canonical strings and round trips ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "cpu -isa=avx512 -cores=2",
        "cpu -isa=avx2 -cores=16",
        "cpu -isa=sse4 -cores=1",
        "cpu -isa=neon -cores=4",
        "cpu -isa=generic -cores=1",
        "cpu -isa=generic -cores=8 -vector-bits=256",
        "cuda -arch=sm_90",
        "cuda -arch=sm_80 -max-threads-per-block=512",
        "cuda -arch=sm_86 -shared-memory-bytes=101376",
        "cuda -arch=sm_120 -max-threads-per-block=256 -shared-memory-bytes=65536",
        "vta -config=1x16x16",
        "vta -config=2x32x8",
    ],
)
def test_canonical_strings_round_trip(text: str) -> None:
    t = Target.parse(text)
    assert str(t) == text
    assert t.canonical == text
    assert Target.parse(str(t)) == t
    assert hash(Target.parse(str(t))) == hash(t)
    assert Target.from_json(t.to_json()) == t
    assert t.to_json() == {"kind": t.kind, "string": text}


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        # fixed key order, whatever order the user wrote
        ("cpu -cores=3 -isa=avx2", "cpu -isa=avx2 -cores=3"),
        # defaults are dropped
        ("cpu -isa=avx2 -cores=2 -vector-bits=256", "cpu -isa=avx2 -cores=2"),
        ("cpu -isa=avx512 -cores=2 -vector-bits=512", "cpu -isa=avx512 -cores=2"),
        ("cuda -arch=sm_90 -max-threads-per-block=1024", "cuda -arch=sm_90"),
        ("cuda -shared-memory-bytes=49152 -arch=sm_90", "cuda -arch=sm_90"),
        ("vta", "vta -config=1x16x16"),
        # integers normalized, extra whitespace ignored
        ("  cpu   -isa=sse4  -cores=004 ", "cpu -isa=sse4 -cores=4"),
        ("vta -config=01x016x16", "vta -config=1x16x16"),
    ],
)
def test_parse_normalizes(text: str, canonical: str) -> None:
    assert str(Target.parse(text)) == canonical


def test_parse_accepts_target_and_constructors_agree() -> None:
    t = Target.parse("cuda -arch=sm_90")
    assert Target.parse(t) is t
    assert Target.cuda("sm_90") == t
    assert Target.vta() == Target.parse("vta")
    assert Target.cpu(isa="avx2", cores=3) == Target.parse("cpu -isa=avx2 -cores=3")
    assert Target("cpu", {"cores": 3, "isa": "avx2"}) == Target.parse("cpu -isa=avx2 -cores=3")


@given(
    isa=st.sampled_from(CPU_ISAS),
    cores=st.integers(1, 512),
    vbits=st.none() | st.sampled_from([64, 128, 256, 512, 1024, 2048]),
)
def test_cpu_round_trip_property(isa: str, cores: int, vbits: int | None) -> None:
    t = Target.cpu(isa=isa, cores=cores, vector_bits=vbits)
    assert Target.parse(str(t)) == t
    assert t.isa == isa and t.cores == cores
    assert t.vector_bits == (vbits or _implied(isa))
    assert ("-vector-bits=" in str(t)) == (vbits is not None and vbits != _implied(isa))


def _implied(isa: str) -> int:
    return {"avx512": 512, "avx2": 256}.get(isa, 128)


@given(
    sm=st.integers(10, 200),
    threads=st.integers(1, 1024),
    smem=st.integers(1, 1 << 20),
    cfg=st.tuples(*[st.sampled_from([1, 2, 4, 8, 16, 32, 64])] * 3),
)
def test_cuda_vta_round_trip_property(
    sm: int, threads: int, smem: int, cfg: tuple[int, int, int]
) -> None:
    c = Target.cuda(f"sm_{sm}", max_threads_per_block=threads, shared_memory_bytes=smem)
    assert Target.parse(str(c)) == c
    assert (c.sm_version, c.max_threads_per_block, c.shared_memory_bytes) == (sm, threads, smem)
    v = Target.vta("x".join(map(str, cfg)))
    assert Target.parse(str(v)) == v
    assert (v.batch, v.block_in, v.block_out) == cfg


# --- typed properties --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("isa", "bits", "flags"),
    [
        ("avx512", 512, ("-march=x86-64-v4", "-mprefer-vector-width=512")),
        ("avx2", 256, ("-march=x86-64-v3",)),
        ("sse4", 128, ("-march=x86-64-v2",)),
        ("neon", 128, ("-march=armv8-a",)),
        ("generic", 128, ()),
    ],
)
def test_cpu_properties(isa: str, bits: int, flags: tuple[str, ...]) -> None:
    t = Target.parse(f"cpu -isa={isa} -cores=2")
    assert t.vector_bits == bits
    assert t.vector_lanes(4) == bits // 32
    assert t.vector_lanes(1) == bits // 8
    assert t.vector_lanes(1024) == 1
    assert t.compiler_flags() == flags
    assert "native" not in " ".join(t.compiler_flags())


def test_explicit_vector_bits_and_bad_lanes() -> None:
    t = Target.parse("cpu -isa=neon -cores=1 -vector-bits=256")
    assert t.vector_bits == 256 and t.vector_lanes(2) == 16
    with pytest.raises(ValueError, match="dtype_bytes"):
        t.vector_lanes(0)


def test_cuda_and_vta_properties() -> None:
    c = Target.parse("cuda -arch=sm_90")
    assert (c.arch, c.sm_version) == ("sm_90", 90)
    assert (c.max_threads_per_block, c.shared_memory_bytes) == (1024, 49152)
    assert c.compiler_flags() == ("-arch=sm_90",)
    v = Target.parse("vta -config=1x16x16")
    assert (v.config, v.batch, v.block_in, v.block_out) == ("1x16x16", 1, 16, 16)
    assert v.compiler_flags() == ()


def test_properties_of_another_kind_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="cpu"):
        _ = Target.parse("vta").isa
    with pytest.raises(AttributeError, match="cuda"):
        _ = Target.parse("cpu -isa=avx2 -cores=1").arch
    with pytest.raises(AttributeError, match="vta"):
        _ = Target.parse("cuda -arch=sm_80").block_in
    assert getattr(Target.parse("vta"), "isa", None) is None


def test_with_options() -> None:
    t = Target.parse("cpu -isa=avx512 -cores=2 -vector-bits=256")
    one = t.with_options(cores=1)
    assert str(one) == "cpu -isa=avx512 -cores=1 -vector-bits=256"
    assert one.hardware == t.hardware
    # changing the isa drops the vector width the old isa was paired with
    assert str(t.with_options(isa="avx2")) == "cpu -isa=avx2 -cores=2"
    c = Target.parse("cuda -arch=sm_90").with_options(max_threads_per_block=256)
    assert str(c) == "cuda -arch=sm_90 -max-threads-per-block=256"
    with pytest.raises(ValueError, match="-bogus"):
        c.with_options(bogus=1)


# --- identity vs facts ---------------------------------------------------------------------


def test_equality_ignores_hardware_facts() -> None:
    a = Target("cpu", {"isa": "avx2", "cores": 4}, {"model_name": "A", "l1d_bytes": 1024})
    b = Target("cpu", {"isa": "avx2", "cores": 4}, {"model_name": "B", "l3_bytes": 1 << 30})
    c = Target("cpu", {"isa": "avx2", "cores": 4})
    assert a == b == c
    assert len({a, b, c}) == 1
    assert a.model_name == "A" and b.model_name == "B" and c.model_name == "unknown"
    assert c.l1d_bytes == 32 * 1024 and c.l2_bytes == 1 << 20 and c.l3_bytes == 8 << 20
    assert str(a) == str(b) == "cpu -isa=avx2 -cores=4"
    assert a != Target("cpu", {"isa": "avx2", "cores": 2})


def test_targets_are_immutable_and_picklable() -> None:
    t = Target.parse("cpu")
    with pytest.raises(AttributeError):
        t.kind = "cuda"  # type: ignore[misc]
    u = pickle.loads(pickle.dumps(t))
    assert u == t and u.hardware == t.hardware
    h = t.hardware
    h["model_name"] = "changed"
    assert t.model_name != "changed"


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("", "cpu, cuda, opencl, vta"),
        ("gpu -arch=sm_90", "gpu"),
        ("CPU", "CPU"),
        ("cpu -isa=avx9", "avx9"),
        ("cpu -isa=avx9", "avx512, avx2, sse4, neon, generic"),
        ("cpu -isa", "-isa"),
        ("cpu isa=avx2", "isa=avx2"),
        ("cpu --isa=avx2", "--isa=avx2"),
        ("cpu -=avx2", "-=avx2"),
        ("cpu -isa=", "-isa="),
        ("cpu -cores=two", "two"),
        ("cpu -cores=1.5", "1.5"),
        ("cpu -cores=-1", "-1"),
        ("cpu -cores=0", "-cores=0"),
        ("cpu -vector-bits=100", "-vector-bits=100"),
        ("cpu -arch=sm_90", "-arch"),
        ("cpu -arch=sm_90", "-isa, -cores, -vector-bits"),
        ("cpu -isa=avx2 -isa=sse4", "-isa"),
        ("cuda -arch=90", "90"),
        ("cuda -arch=sm_9a", "sm_9a"),
        ("cuda -arch=sm_90 -max-threads-per-block=2048", "2048"),
        ("cuda -arch=sm_90 -max-threads-per-block=lots", "lots"),
        ("cuda -arch=sm_90 -shared-memory-bytes=0", "-shared-memory-bytes=0"),
        ("cuda -arch=sm_90 -isa=avx2", "-isa"),
        ("vta -config=1x3x16", "1x3x16"),
        ("vta -config=16x16", "16x16"),
        ("vta -config=axbxc", "axbxc"),
        ("vta -config=1x16x16 -cores=2", "-cores"),
    ],
)
def test_bad_input_raises_value_error_naming_it(text: str, bad: str) -> None:
    with pytest.raises(ValueError) as info:
        Target.parse(text)
    assert bad in str(info.value)


@pytest.mark.parametrize(
    ("kind", "attrs", "bad"),
    [
        ("fpga", {}, "fpga"),
        ("cpu", {"isa": "avx2"}, "-cores"),
        ("cuda", {}, "-arch"),
        ("cpu", {"isa": "avx2", "cores": True}, "bool"),
        ("cpu", [("isa", "avx2"), ("isa", "sse4"), ("cores", 1)], "-isa"),
    ],
)
def test_bad_constructor_args(kind: str, attrs: object, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        Target(kind, attrs)  # type: ignore[arg-type]


def test_parse_rejects_non_strings_and_bad_json() -> None:
    with pytest.raises(TypeError):
        Target.parse(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="string"):
        Target.from_json({"kind": "cpu"})
    with pytest.raises(ValueError, match="disagrees"):
        Target.from_json({"kind": "cuda", "string": "vta -config=1x16x16"})


# --- host detection ----------------------------------------------------------------------------


def test_host_cpu_target_is_sane() -> None:
    t = host_cpu_target()
    assert t.kind == "cpu"
    assert t.isa in CPU_ISAS
    assert t.cores >= 1
    assert t.cores <= (os.cpu_count() or t.cores)
    assert t.l1d_bytes > 0 and t.l2_bytes > 0 and t.l3_bytes > 0
    assert isinstance(t.model_name, str) and t.model_name
    assert host_cpu_target() is t  # cached
    assert Target.parse("cpu") == t
    assert Target.parse(str(t)) == t
    if platform.machine().lower() in ("aarch64", "arm64"):
        assert t.isa == "neon"


def test_cpu_overrides_keep_detected_values() -> None:
    host = host_cpu_target()
    t = Target.parse("cpu -isa=generic")
    assert t.isa == "generic" and t.cores == host.cores
    assert t.hardware == host.hardware  # same machine, so same cache facts
    t = Target.parse("cpu -cores=1")
    assert t.isa == host.isa and t.cores == 1


def test_cross_family_isa_does_not_borrow_host_facts() -> None:
    foreign = "avx2" if target_mod._host_family() == "arm" else "neon"
    t = Target.parse(f"cpu -isa={foreign}")
    assert t.hardware == {}
    assert t.model_name == "unknown" and t.l2_bytes == 1 << 20


def test_env_override_lowers_isa(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CPU_ISA_ENV, "generic")
    assert host_cpu_target().isa == "generic"
    assert Target.parse("cpu").isa == "generic"
    if host_isa_rank() >= 2:
        monkeypatch.setenv(CPU_ISA_ENV, "avx2")
        assert str(host_cpu_target()).startswith("cpu -isa=avx2 ")
    monkeypatch.setenv(CPU_ISA_ENV, "")
    assert host_cpu_target().isa == target_mod._detect_host_cpu()[0]


def host_isa_rank() -> int:
    """0 = generic, 1 = sse4, 2 = avx2, 3 = avx512 (0 off x86)."""
    if target_mod._host_family() != "x86":
        return 0
    return ["generic", "sse4", "avx2", "avx512"].index(target_mod._detect_host_cpu()[0])


@pytest.mark.parametrize("value", ["avx9", "AVX2", "neon-ish"])
def test_env_override_rejects_unknown_isa(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(CPU_ISA_ENV, value)
    with pytest.raises(ValueError) as info:
        host_cpu_target()
    assert CPU_ISA_ENV in str(info.value) and value in str(info.value)


def test_env_override_rejects_isa_the_host_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    foreign = "avx512" if target_mod._host_family() == "arm" else "neon"
    monkeypatch.setenv(CPU_ISA_ENV, foreign)
    with pytest.raises(ValueError, match=foreign):
        host_cpu_target()


@pytest.mark.parametrize(
    ("family", "flags", "isa"),
    [
        ("x86", "fpu sse4_2 avx2 fma avx512f avx512bw avx512vl avx512dq", "avx512"),
        ("x86", "fpu sse4_2 avx2 fma avx512f", "avx2"),  # avx512f alone is not enough
        ("x86", "fpu sse4_2 avx2", "sse4"),  # avx2 without fma
        ("x86", "fpu sse4_1", "generic"),
        ("arm", "fp asimd", "neon"),
        ("other", "", "generic"),
    ],
)
def test_isa_from_flags(family: str, flags: str, isa: str) -> None:
    assert target_mod._isa_from_flags(family, flags.split()) == isa


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("48K", 48 << 10),
        ("1024K", 1 << 20),
        ("32768K", 32 << 20),
        ("1M", 1 << 20),
        ("8192 KB", 8 << 20),
        ("512", 512),
        ("1G", 1 << 30),
        ("junk", None),
        ("0K", None),
    ],
)
def test_parse_cache_size(text: str, size: int | None) -> None:
    assert target_mod._parse_cache_size(text) == size


def test_read_cache_sizes_from_fake_sysfs(tmp_path: Path) -> None:
    def index(i: int, level: str, ctype: str, size: str) -> None:
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, text in (("level", level), ("type", ctype), ("size", size)):
            (d / name).write_text(text + "\n")

    index(0, "1", "Data", "48K")
    index(1, "1", "Instruction", "32K")
    index(2, "2", "Unified", "2M")
    assert target_mod._read_cache_sizes(tmp_path) == {
        "l1d_bytes": 48 << 10,
        "l2_bytes": 2 << 20,
        "l3_bytes": 8 << 20,  # missing level -> default
    }
    assert target_mod._read_cache_sizes(tmp_path / "missing") == {
        "l1d_bytes": 32 << 10,
        "l2_bytes": 1 << 20,
        "l3_bytes": 8 << 20,
    }


def test_cuda_detection_uses_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(target_mod, "nvidia_gpus",
                        lambda: (("9.0", "NVIDIA H100"), ("8.0", "NVIDIA A100")))
    t = Target.parse("cuda")
    assert str(t) == "cuda -arch=sm_90" and t.model_name == "NVIDIA H100"
    t = Target.parse("cuda -max-threads-per-block=512")
    assert str(t) == "cuda -arch=sm_90 -max-threads-per-block=512"
    monkeypatch.setattr(target_mod, "nvidia_gpus", lambda: ())
    with pytest.raises(ValueError, match="-arch"):
        Target.parse("cuda")
    monkeypatch.setattr(target_mod, "nvidia_gpus", lambda: (("9.x", "odd"),))
    with pytest.raises(ValueError, match="unreadable compute capability '9.x'"):
        Target.parse("cuda")


# --- toolchains ---------------------------------------------------------------------------------

_TINY_C = "float add(const float *a, const float *b, int i) { return a[i] + b[i]; }\n"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_host_compiler_flags_are_accepted_by_gcc(tmp_path: Path) -> None:
    src = tmp_path / "tiny.c"
    src.write_text(_TINY_C)
    family = target_mod._host_family()
    # every ISA of the host's family: gcc can build for any of them, whatever the host has
    isas = [isa for isa in CPU_ISAS if target_mod._ISA_FAMILY.get(isa, family) == family]
    assert host_cpu_target().isa in isas
    for isa in isas:
        flags = Target.parse(f"cpu -isa={isa} -cores=1").compiler_flags()
        proc = subprocess.run(
            ["gcc", *flags, "-O2", "-c", str(src), "-o", str(tmp_path / "tiny.o")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, f"gcc {' '.join(flags)}: {proc.stderr}"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_compiler_flags_are_accepted_by_nvcc(tmp_path: Path) -> None:
    src = tmp_path / "tiny.cu"
    src.write_text('extern "C" __global__ void k(float *a) { a[threadIdx.x] += 1.0f; }\n')
    flags = Target.parse("cuda -arch=sm_90").compiler_flags()
    proc = subprocess.run(
        ["nvcc", *flags, "--ptx", str(src), "-o", str(tmp_path / "tiny.ptx")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
