"""The vector math of generated code (``schedule.vmath``) against float64 references over
the whole float32 range: random bit patterns (every exponent, NaN payloads, denormals),
dense grids around the range-reduction and branch thresholds, and special values. Each
function is built as a vectorized kernel, as the search would build it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from schedule import build, te, vmath
from tests.cpu_support import LANES

N = 1 << 18
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0,
                     np.finfo(np.float32).max, -np.finfo(np.float32).max,
                     np.finfo(np.float32).tiny, -np.finfo(np.float32).tiny,
                     np.finfo(np.float32).smallest_subnormal, 88.72283, 88.72284, 88.75, 89.0,
                     -87.33655, -103.97208, -103.97209, -104.0, -150.0, 0.625, -0.625, 3.92,
                     -3.92, 3.9, 9.0, 1.4142135, 0.70710677, 1e-30, -1e-30], np.float32)


def _inputs(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, size=N // 2, dtype=np.uint64).astype(np.uint32)
    parts = [bits.view(np.float32),
             np.linspace(-110.0, 110.0, N // 8, dtype=np.float32),
             np.linspace(-4.5, 4.5, N // 8, dtype=np.float32),
             rng.uniform(0.0, 2.0, N // 8).astype(np.float32),
             (rng.integers(1, 2**23, N // 8 - SPECIALS.size).astype(np.uint32)
              .view(np.float32)),  # denormals
             SPECIALS]
    x = np.concatenate(parts)
    assert x.size == N
    return x


REFERENCES = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "erf": special.erf,
    "sigmoid": special.expit,
}


def _kernel(name: str, lanes: int):
    x = te.placeholder((N,), name="x", dtype="float32")
    y = te.compute((N,), lambda i: getattr(te, name)(x[i]), name="y")
    s = te.create_schedule(y)
    _, inner = s[y].split(y.op.axis[0], factor=lanes)
    s[y].vectorize(inner)
    return build(s, [x, y], "cpu")


def _ulp_errors(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the float32 ulp at ``want`` (float64), for finite results."""
    rounded = want.astype(np.float32)
    ulp = np.spacing(np.abs(rounded)).astype(np.float64)
    ulp = np.maximum(ulp, float(np.finfo(np.float32).smallest_subnormal))
    return np.abs(got.astype(np.float64) - want) / ulp


@pytest.mark.parametrize("name", vmath.FUNCTIONS)
def test_vector_math_is_within_its_ulp_bound_over_the_whole_range(name: str) -> None:
    mod = _kernel(name, 16)
    assert f"tt_v{name}_f32x{min(LANES, 16)}(" in mod.source  # the vector version, not a lane loop
    x = _inputs(seed=len(name))
    got = np.empty_like(x)
    mod(x, got)
    with np.errstate(all="ignore"):
        want = REFERENCES[name](x.astype(np.float64))
        want32 = want.astype(np.float32)
    special_result = ~np.isfinite(want32)
    np.testing.assert_array_equal(got[special_result], want32[special_result],
                                  err_msg=f"{name}: inf/nan results")
    errors = _ulp_errors(got[~special_result], want[~special_result])
    worst = int(np.argmax(errors))
    assert errors[worst] <= vmath.ULP_BOUNDS[name], (
        f"{name}({x[~special_result][worst]!r}) = {got[~special_result][worst]!r}, "
        f"{errors[worst]:.2f} ulp from {want[~special_result][worst]!r}")


@pytest.mark.parametrize("name, lanes", [("tanh", 4), ("tanh", 8), ("tanh", 64), ("exp", 64)])
def test_vector_math_at_other_widths_matches_the_16_lane_version(name: str, lanes: int) -> None:
    # on an AVX-512 target, 16 lanes scale by 2^n with vscalefps, other widths in two steps
    # (narrower hosts compute 16 lanes in pieces of their own width)
    x = _inputs(seed=lanes)
    reference, got = np.empty_like(x), np.empty_like(x)
    sixteen = _kernel(name, 16)
    sixteen(x, reference)
    _kernel(name, lanes)(x, got)
    np.testing.assert_array_equal(got, reference)
    assert ("__builtin_ia32_scalefps512_mask" in sixteen.source) == (LANES == 16)
    # and clamps the argument with one vmaxps and one vminps, NaN passing through
    assert ("__builtin_ia32_maxps512_mask" in sixteen.source) == (LANES == 16)


def test_a_function_without_a_vector_version_is_named() -> None:
    with pytest.raises(ValueError, match="no vector version of 'sqrt'"):
        vmath.definitions("sqrt", "v", "i", "s")
