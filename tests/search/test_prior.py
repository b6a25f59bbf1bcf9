"""The register-tile prior (search.prior): half the random samples of a CPU tiling draw
their innermost tile from shapes that keep the vector unit busy."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from schedule import Workload, build, ops, te
from search import SearchTask
from search.policy import SearchParams, SketchPolicy
from search.prior import MAX_VECTORS, OPERAND_REGISTERS, RegisterTiles
from search.rules import generate_sketches
from search.sketch import decision_space, instantiate, sampler
from tests.cpu_support import needs_avx512


def _packed_conv() -> Workload:
    data = te.placeholder((1, 2, 10, 10, 16), "float32", name="data")
    kernel = te.placeholder((4, 2, 3, 3, 16, 16), "float32", name="kernel")
    return Workload.from_tensors([ops.conv2d_nchwc(data, kernel)])


CASES = [Workload.op("dense", M=64, N=96, K=200, bias=True, activation="relu"),
         Workload.op("conv2d_nchw", N=1, C=8, H=16, W=16, K=32, R=3, S=3, padding=1),
         _packed_conv()]


@pytest.mark.parametrize("isa,registers", [pytest.param("avx512", 32, marks=needs_avx512),
                                           ("avx2", 16)])
@pytest.mark.parametrize("workload", CASES, ids=["dense", "conv2d", "conv2d_nchwc"])
def test_register_tiles_fill_the_registers_with_mostly_full_vectors(workload, isa, registers):
    task = SearchTask(workload, f"cpu -isa={isa} -cores=2")
    lanes = task.vector_lanes(4)
    rng = random.Random(0)
    prior = RegisterTiles(task)
    inputs = workload.random_inputs(0)
    (expected,) = workload.reference(inputs)
    shaped = 0
    for sketch in generate_sketches(task):
        space = decision_space(task, sketch)
        for _ in range(6):
            decisions = prior.draw(sketch, space, rng)
            tiled = [op.stage for op in sketch.ops if op.kind == "tile"]
            if not tiled:
                assert decisions == {}
                continue
            shaped += 1
            names = [n for n in space if n.startswith(f"tile:{tiled[0]}:")]
            spatial = [n for n in names if space[n].parts == 3]
            vector = decisions[spatial[-1]][-1]
            # whole vectors, or (AVX-512's masked vectors) a last one more than half full
            tail = vector % lanes
            assert tail == 0 or (isa == "avx512" and tail > lanes // 2), vector
            picks_vectors = prior.vector_axes(tiled[0])
            vectors = -(-vector // lanes) * math.prod(
                decisions[n][-1] for n in spatial[:-1] if n.split(":")[2] in picks_vectors)
            rows = math.prod(decisions[n][-1] for n in spatial[:-1]
                             if n.split(":")[2] not in picks_vectors)
            assert vectors <= MAX_VECTORS[registers]
            assert vectors * rows <= registers - OPERAND_REGISTERS
            for n in names:  # every value valid, outer levels covering the extent
                assert space[n].is_valid(decisions[n]), (n, decisions[n])
                if space[n].parts == 1:  # the reduction's inner tile: as long as allowed
                    assert decisions[n][0] == max(space[n].innermost_choices())
            s, args = instantiate(task, sketch, sampler(dict(decisions), {}, rng))
            out = np.zeros_like(expected)
            build(s, args, target=task.target)(*inputs, out)
            np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-4)
    assert shaped >= 6


def test_axes_that_pick_the_vector_operand_add_vectors_and_the_others_rows():
    """A dense layer's rows are broadcast values; a packed conv's output channel blocks
    pick weight vectors and its output pixels are broadcast; in NCHW the conv's vector
    runs along an output row, so its rows pick input vectors and the channels broadcast."""
    def vector_axes(workload: Workload, stage: str) -> set[str]:
        return RegisterTiles(SearchTask(workload, "cpu -isa=avx512 -cores=2")).vector_axes(
            stage)

    assert vector_axes(CASES[0], "T_dense") == set()
    assert vector_axes(CASES[1], "conv") == {"n", "oh"}
    assert vector_axes(CASES[2], "conv") == {"ko"}


def _conv_columns(width: int) -> Workload:
    return Workload.op("conv2d_nchw", N=1, C=8, H=width, W=width, K=32, R=3, S=3, padding=1)


def test_a_gpu_tiling_or_a_vector_axis_of_no_well_filled_vector_is_left_to_the_uniform_draw():
    task = SearchTask(CASES[0], "cuda -arch=sm_80")
    sketch = generate_sketches(task)[0]
    assert RegisterTiles(task).draw(sketch, decision_space(task, sketch),
                                    random.Random(0)) == {}
    # fewer columns than a vector: 6 on AVX2's 8 lanes (no masks), 7 on AVX-512's 16 (a
    # masked vector less than half full); the sketches that accumulate with the 32
    # channels innermost instead (transposed) do get register tiles of channels
    for width, isa in [(6, "avx2"), (7, "avx512")]:
        task = SearchTask(_conv_columns(width), f"cpu -isa={isa} -cores=2")
        for sketch in generate_sketches(task):
            space = decision_space(task, sketch)
            drawn = RegisterTiles(task).draw(sketch, space, random.Random(0))
            if "transposed" in str(sketch):
                assert drawn["tile:conv.local:k"][-1] % (8 if isa == "avx2" else 16) == 0
            else:
                assert drawn == {}


def test_a_vector_axis_that_leaves_a_mostly_full_masked_vector_is_drawn_on_avx512():
    # 14 output columns of a stride-2 conv: one 16-lane vector with its last two lanes masked
    task = SearchTask(_conv_columns(14), "cpu -isa=avx512 -cores=2")
    prior = RegisterTiles(task)
    for sketch in generate_sketches(task):
        tiled = [op.stage for op in sketch.ops if op.kind == "tile"]
        if tiled and "transposed" not in str(sketch):  # (those vectorize the channels)
            decisions = prior.draw(sketch, decision_space(task, sketch), random.Random(0))
            assert decisions[f"tile:{tiled[0]}:ow"][-1] == 14


def test_the_policy_samples_from_the_prior_as_often_as_asked():
    task = SearchTask(CASES[0], "cpu -isa=avx512 -cores=2")
    lanes = task.vector_lanes(4)

    def vector_widths(share: float) -> list[int]:
        policy = SketchPolicy(task, "random", seed=1, params=SearchParams(register_prior=share))
        widths = []
        for _ in range(40):
            cand = policy.sample()
            if cand is not None:
                tile = [v for k, v in cand.decisions.items() if k.endswith(":j")]
                widths += [t[-1] for t in tile]
        return widths

    most = MAX_VECTORS[32] * lanes
    assert all((w % lanes == 0 or w % lanes > lanes // 2) and w <= most
               for w in vector_widths(1.0))
    assert any(w % lanes or w > most for w in vector_widths(0.0))


def test_a_vector_axis_no_divisor_fills_is_drawn_in_whole_vectors_with_a_partial_last_tile():
    # 383 columns (a prime): 1 to 4 vectors of them per tile (AVX-512's 32 registers), the
    # last tile partial
    task = SearchTask(Workload.op("matmul", M=33, N=383, K=40), "cpu -isa=avx512 -cores=2")
    prior = RegisterTiles(task)
    rng = random.Random(0)
    widths = set()
    for sketch in generate_sketches(task):
        tiled = [op.stage for op in sketch.ops if op.kind == "tile"]
        if tiled and "transposed" not in str(sketch):  # (those vectorize the channels)
            for _ in range(20):
                widths.add(prior.draw(sketch, decision_space(task, sketch), rng)[
                    f"tile:{tiled[0]}:j"][-1])
    assert widths == {16, 32, 48, 64}


def test_register_tiles_that_divide_nothing_fill_the_accumulators_of_avx2():
    """16 registers hold 12 accumulators: 6 rows x 2 vectors or 4 x 3, neither of which
    divides 64; both are drawn (the last tile partial) and compute the reference."""
    wl = Workload.op("matmul", M=64, N=64, K=32)
    task = SearchTask(wl, "cpu -isa=avx2 -cores=2")
    prior, rng = RegisterTiles(task), random.Random(0)
    sketch = generate_sketches(task)[0]
    space = decision_space(task, sketch)
    drawn = {}
    for _ in range(200):
        decisions = prior.draw(sketch, space, rng)
        shape = (decisions["tile:T_matmul.local:i"][-1], decisions["tile:T_matmul.local:j"][-1])
        drawn.setdefault(shape, decisions)
    assert {(6, 16), (4, 24)} <= set(drawn)
    inputs = wl.random_inputs(0)
    (expected,) = wl.reference(inputs)
    for shape in ((6, 16), (4, 24)):
        s, args = instantiate(task, sketch, sampler(dict(drawn[shape]), {}, rng))
        out = np.zeros_like(expected)
        build(s, args, target=task.target)(*inputs, out)
        np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-4)


def test_a_reduction_over_a_packed_panel_is_drawn_long_and_in_several_lengths():
    task = SearchTask(Workload.op("matmul", M=64, N=64, K=1024), "cpu -isa=avx2 -cores=2")
    prior, rng = RegisterTiles(task), random.Random(0)
    lengths = {}
    for sketch in generate_sketches(task)[:4]:  # the fused tilings, then the packed ones
        space = decision_space(task, sketch)
        lengths[str(sketch)] = {prior.draw(sketch, space, rng)["tile:T_matmul.local:k"][0]
                                for _ in range(60)}
    plain, packed = [v for k, v in lengths.items() if "pack" not in k], \
        [v for k, v in lengths.items() if "pack" in k]
    assert all(v == {64} for v in plain)
    assert all(v == {64, 128, 256} for v in packed)


def test_half_the_draws_hold_the_accumulators_across_the_whole_reduction():
    """The spatial level between the reduction's two loops is 1 in about half the draws
    (every spatial axis at once), so the reduction's outer loop wraps the register tile's
    inner one directly; uniform draws alone do so far less often."""
    task = SearchTask(Workload.op("matmul", M=1024, N=1024, K=1024), "cpu -isa=avx2 -cores=2")
    prior, rng = RegisterTiles(task), random.Random(0)
    sketch = generate_sketches(task)[0]
    space = decision_space(task, sketch)
    draws = 200
    held = 0
    for _ in range(draws):
        decisions = prior.draw(sketch, space, rng)
        middles = [decisions[f"tile:T_matmul.local:{axis}"][1] for axis in ("i", "j")]
        held += middles == [1, 1]
    assert 0.4 * draws <= held <= 0.75 * draws
