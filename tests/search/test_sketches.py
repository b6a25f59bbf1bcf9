"""Sketch generation and annotation sampling: every sketch and every sampled program of the
issue's operators is valid and correct against numpy."""

from __future__ import annotations

import random

import numpy as np
import pytest

from schedule import Workload, build, lower, make_schedule, ops, te
from search.rules import RuleResult, generate_sketches, register_sketch_rule, unregister_sketch_rule
from search.sketch import InvalidProgram, SketchOp, decision_space, instantiate, sampler
from search.space import ChoiceDecision, TileDecision
from search.task import SearchTask

CASES = [
    ("matmul", {"M": 40, "N": 48, "K": 24}),
    ("batch_matmul", {"B": 2, "M": 12, "N": 20, "K": 8, "transpose_b": True}),
    ("batch_matmul", {"B": 2, "M": 10, "N": 24, "K": 12}),  # B read down k: packed too
    ("conv2d_nchw", {"N": 1, "C": 6, "H": 10, "W": 10, "K": 8, "R": 3, "S": 3, "padding": 1}),
    # 10 output columns fill no whole vector, 16 channels do: also transposed accumulators
    ("conv2d_nchw", {"N": 1, "C": 3, "H": 21, "W": 21, "K": 16, "R": 5, "S": 5, "stride": 2,
                     "padding": 1}),
    ("conv2d_nhwc", {"N": 1, "C": 8, "H": 9, "W": 9, "K": 12, "R": 3, "S": 3, "stride": 2,
                     "padding": 1}),
    ("depthwise_conv2d_nchw", {"N": 1, "C": 8, "H": 11, "W": 11, "R": 3, "S": 3,
                               "padding": 1}),
    ("softmax", {"M": 4, "N": 130}),
    ("layer_norm", {"M": 6, "N": 96}),
    # more rows than the cores' vector lanes: the reductions factor per row
    ("softmax", {"M": 40, "N": 96}),
    ("log_softmax", {"M": 36, "N": 80}),
    ("layer_norm", {"M": 48, "N": 64}),
    ("dense", {"M": 12, "N": 20, "K": 16, "bias": True, "activation": "relu"}),
    # a batch-1 dense layer: also its dot products across the lanes
    ("dense", {"M": 1, "N": 40, "K": 200, "bias": True, "activation": "relu"}),
]

SAMPLES_PER_SKETCH = 2


@pytest.mark.parametrize("op, params", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_sketch_and_sample_is_correct(op, params):
    _check_every_sketch(SearchTask(Workload.op(op, **params), "cpu"))


def _check_every_sketch(task: SearchTask) -> None:
    """Programs sampled from every sketch of ``task`` match numpy and replay exactly."""
    wl = task.workload
    sketches = generate_sketches(task)
    assert sketches
    inputs = wl.random_inputs(seed=0)
    (expected,) = wl.reference(inputs)
    rng = random.Random(0)
    for sketch in sketches:
        for _ in range(SAMPLES_PER_SKETCH):
            decisions: dict = {}
            s, args = instantiate(task, sketch, sampler(decisions, {}, rng))
            out = np.zeros(expected.shape, expected.dtype)
            build(s, args)(*inputs, out)
            np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-4,
                                       err_msg=f"{sketch}: {s.steps}")
            # the same decisions replay to the same steps
            s2, _ = instantiate(task, sketch, sampler(dict(decisions), {}, rng))
            assert s2.steps == s.steps


def test_matmul_sketches_tile_with_a_cache_stage_or_plainly():
    task = SearchTask(Workload.op("matmul", M=64, N=64, K=64), "cpu")
    names = [str(s) for s in generate_sketches(task)]
    assert any("cache_write" in n and "L1" in n for n in names)
    assert any("cache_write" in n and "L2" in n for n in names)
    assert any(n == "tile T_matmul" for n in names)
    assert sum("pack B for T_matmul.local" in n for n in names) == 2  # both fused tilings


@pytest.mark.parametrize(("op", "params", "layout"), [
    # 55 columns on 16 (or 8) lanes; the 64 channels fill whole vectors: they go last,
    # and the weights are read from a copy with the output channels innermost
    ("conv2d_nchw", {"N": 1, "C": 3, "H": 224, "W": 224, "K": 64, "R": 11, "S": 11,
                     "stride": 4, "padding": 2}, ([0, 2, 3, 1], [("kernel", [1, 2, 3, 0])])),
    # rows of 20 on 16 lanes, 32 rows: A is read along i in its outer dimension
    ("matmul", {"M": 32, "N": 20, "K": 8}, ([1, 0], [("A", [1, 0])])),
    # whole vectors of columns already: nothing to transpose
    ("conv2d_nchw", {"N": 1, "C": 3, "H": 32, "W": 32, "K": 64, "R": 3, "S": 3,
                     "padding": 1}, None),
    # no other axis fills a vector
    ("matmul", {"M": 30, "N": 20, "K": 8}, None),
])
def test_a_stage_whose_rows_fill_no_vectors_may_vectorize_another_axis(op, params, layout):
    from search import analysis

    s, _ = make_schedule(Workload.op(op, **params))
    (stage,) = [st for st in analysis.compute_stages(s) if st.op.reduce_axis]
    assert analysis.transposed_vector_layout(stage, 16) == layout


@pytest.mark.parametrize(("wl", "offered"), [
    # weights of 1.2 MB against 116 MFLOP: the copy is cheap beside the convolution
    (Workload.op("conv2d_nchw", N=1, C=128, H=28, W=28, K=256, R=3, S=3, stride=2,
                 padding=1), True),
    # a depthwise convolution would copy its whole padded input for 4 FLOPs a byte
    (Workload.op("depthwise_conv2d_nchw", N=1, C=256, H=28, W=28, R=3, S=3, padding=1),
     False),
])
def test_transposed_copies_are_offered_only_where_cheap_beside_the_work(wl, offered):
    from search import analysis

    s, _ = make_schedule(wl)
    (stage,) = [st for st in analysis.compute_stages(s) if st.op.reduce_axis]
    assert analysis.transposed_vector_layout(stage, 16) is not None  # the layout fits both
    names = [str(sk) for sk in generate_sketches(SearchTask(wl, "cpu -isa=avx512 -cores=2"))]
    assert any("transposed" in n for n in names) == offered


def test_transposed_accumulators_hold_whole_vectors_of_channels_and_write_nchw():
    """The AlexNet stem in NCHW (55 output columns): the transposed sketch accumulates a
    register tile of 5 columns x 64 channels, channels innermost (whole vectors), reads
    the weights from a copy with the channels innermost (made a block of 16 channels at a
    time), and writes NCHW: numpy agrees."""
    wl = Workload.op("conv2d_nchw", N=1, C=3, H=224, W=224, K=64, R=11, S=11, stride=4,
                     padding=2)
    task = SearchTask(wl, "cpu")
    names = [str(sk) for sk in generate_sketches(task)]
    transposed = [n for n in names if "transposed [0, 2, 3, 1]" in n]
    assert len(transposed) == 2 and all(
        "transpose kernel [1, 2, 3, 0] for conv.local" in n for n in transposed)
    (sketch,) = [sk for sk in generate_sketches(task)
                 if "transposed" in str(sk) and "L1" in str(sk)]
    decisions = {"tile:conv.local:n": (1, 1, 1), "tile:conv.local:oh": (1, 1, 1),
                 "tile:conv.local:ow": (1, 1, 5), "tile:conv.local:k": (1, 1, 64),
                 "tile:conv.local:rc": (3,), "tile:conv.local:ry": (11,),
                 "tile:conv.local:rx": (11,), "location:phases": "inline",
                 "unroll:conv.local": 512}
    s, args = instantiate(task, sketch, sampler(decisions, {}, random.Random(0)))
    # the copy walks 16 weight rows at a time (a block of its vector lanes outermost)
    assert s["kernel.global"].leaf_iter_vars[0].name.startswith("ax3.outer")
    text = str(lower(s, args))
    assert "allocate kernel_global: float32[3, 11, 11, 64]" in text
    assert "allocate conv_local: float32[1, 1, 5, 64]" in text
    inputs = wl.random_inputs(0)
    out = np.zeros((1, 64, 55, 55), "float32")
    build(s, args)(*inputs, out)
    np.testing.assert_allclose(out, wl.reference(inputs)[0], rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize(("op", "params", "panels"), [
    ("matmul", {"M": 8, "N": 8, "K": 8}, ["B"]),
    ("batch_matmul", {"B": 2, "M": 8, "N": 8, "K": 8}, ["B"]),
    # read along the vector axis only through ``k``-contiguous rows: nothing to pack
    ("batch_matmul", {"B": 2, "M": 8, "N": 8, "K": 8, "transpose_b": True}, []),
    ("dense", {"M": 8, "N": 8, "K": 8}, []),
    ("conv2d_nchw", {"N": 1, "C": 4, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3}, []),
])
def test_operands_read_a_row_apart_per_step_are_packed(op, params, panels):
    from search import analysis

    s, _ = make_schedule(Workload.op(op, **params))
    (stage,) = [st for st in analysis.compute_stages(s) if st.op.reduce_axis]
    assert analysis.panel_operands(stage) == panels


@pytest.mark.parametrize("level", [0, 1])
def test_a_packed_panel_holds_the_rows_and_columns_its_tile_reads(level):
    wl = Workload.op("matmul", M=64, N=100, K=48)
    task = SearchTask(wl, "cpu")
    (sketch,) = [sk for sk in generate_sketches(task)
                 if "L1" in str(sk) and "pack B" in str(sk)]
    decisions = {"tile:T_matmul.local:i": (2, 2, 4), "tile:T_matmul.local:j": (2, 1, 24),
                 "tile:T_matmul.local:k": (16,), "pack:T_matmul.local": level}
    s, args = instantiate(task, sketch, sampler(decisions, {}, random.Random(0)))
    text = str(lower(s, args))
    # the outermost tile reads all 48 rows of 48 of B's columns; the next level 24 of them
    width = 48 if level == 0 else 24
    assert f"allocate B_global: float32[48, {width}]" in text
    inputs = wl.random_inputs(0)
    out = np.zeros((64, 100), "float32")
    build(s, args)(*inputs, out)
    np.testing.assert_allclose(out, wl.reference(inputs)[0], rtol=2e-4, atol=2e-4)


def test_decision_space_lists_tiles_and_annotations():
    task = SearchTask(Workload.op("matmul", M=64, N=96, K=32), "cpu")
    sketch = generate_sketches(task)[0]
    space = decision_space(task, sketch)
    tile = space["tile:T_matmul.local:i"]
    assert isinstance(tile, TileDecision) and tile.extent == 64 and tile.parts == 3
    assert isinstance(space["unroll:T_matmul.local"], ChoiceDecision)
    assert any(name.startswith("parallel:") for name in space)


def test_tile_sampling_includes_non_dividing_factors():
    decision = TileDecision(1000, 3)
    rng = random.Random(1)
    values = [decision.sample(rng) for _ in range(300)]
    assert all(decision.is_valid(v) for v in values)
    assert any(1000 % v[-1] for v in values)  # some inner factors do not divide 1000
    assert any(all(1000 % f == 0 for f in v) for v in values)
    for v in values[:50]:
        assert decision.is_valid(decision.mutate(v, rng))


@pytest.mark.parametrize(("extent", "allowed"), [
    (3072, {16, 32, 48, 64}),     # whole vectors of 16 lanes divide it
    (1000, {8, 40}),              # none does: whole halves of one
    (1004, {4}),                  # nor a half: quarters
    (999, {1, 3, 9, 27, 37}),     # odd: any divisor
])
def test_a_reduction_factor_is_drawn_in_whole_vectors_or_the_largest_parts_of_one(
        extent: int, allowed: set[int]) -> None:
    """The partial results of a factored reduction fill vectors of 16 lanes where a divisor
    allows; a row of 1000 is factored by 8 or 40 (whole half-vectors), never by 4 or 5."""
    decision = TileDecision(extent, 1, max_innermost=64, innermost_multiple=16,
                            inexact_probability=0.0)
    rng = random.Random(1)
    drawn = {decision.sample(rng)[0] for _ in range(200)}
    assert drawn == allowed
    assert set(decision.innermost_choices()) == allowed


def test_an_axis_read_in_blocks_is_tiled_in_whole_blocks():
    """A weight packed in panels of 16 columns (``W[j // 16, k, j % 16]``): every sketch's
    innermost tile of ``j`` is a whole number of panels, so a vector of lanes reads one
    panel's consecutive weights; the programs stay correct."""
    X = te.placeholder((32, 24), name="X")
    W = te.placeholder((4, 24, 16), name="W")
    wl = Workload.from_tensors([ops.dense_packed(X, W)])
    task = SearchTask(wl, "cpu")
    rng = random.Random(0)
    inputs = wl.random_inputs(0)
    tiled = 0
    for sketch in generate_sketches(task):
        space = decision_space(task, sketch)
        for name, decision in space.items():
            if name.startswith("tile:") and name.endswith(":j"):
                tiled += 1
                assert decision.innermost_multiple == 16
                assert all(decision.sample(rng)[-1] % 16 == 0 for _ in range(50))
            elif name.startswith("tile:") and name.endswith(":i"):
                assert decision.innermost_multiple == 1
        s, args = instantiate(task, sketch, sampler({}, {}, rng))
        out = np.zeros((32, 64), "float32")
        build(s, args)(*inputs, out)
        np.testing.assert_allclose(out, wl.reference(inputs)[0], rtol=2e-4, atol=2e-4)
    assert tiled


def test_a_program_with_non_dividing_tiles_is_correct():
    wl = Workload.op("matmul", M=97, N=50, K=31)
    task = SearchTask(wl, "cpu")
    sketch = generate_sketches(task)[0]
    decisions = {"tile:T_matmul.local:i": (2, 3, 7), "tile:T_matmul.local:j": (1, 3, 16),
                 "tile:T_matmul.local:k": (6,)}
    s, args = instantiate(task, sketch, sampler(decisions, {}, random.Random(0)))
    inputs = wl.random_inputs(0)
    out = np.zeros((97, 50), "float32")
    build(s, args)(*inputs, out)
    np.testing.assert_allclose(out, wl.reference(inputs)[0], rtol=2e-4, atol=2e-4)


def test_users_can_register_a_sketch_rule():
    def never_tile(ctx, stage: te.Stage):
        if stage.op.reduce_axis:
            return RuleResult([[SketchOp("location", stage.name)]], skip_rest=True)
        return None

    register_sketch_rule("never_tile", never_tile)
    try:
        with pytest.raises(ValueError, match="already registered"):
            register_sketch_rule("never_tile", never_tile)
        task = SearchTask(Workload.op("matmul", M=16, N=16, K=16), "cpu")
        assert [str(s) for s in generate_sketches(task)] == [""]
    finally:
        unregister_sketch_rule("never_tile")
    assert len(generate_sketches(task)) == 5


def test_an_invalid_program_is_rejected_with_the_reason():
    from search.sketch import Sketch

    task = SearchTask(Workload.op("softmax", M=4, N=16), "cpu")
    broken = Sketch("inline a reduction", [SketchOp("inline", "T_softmax_maxelem")])
    with pytest.raises(InvalidProgram, match="reduction cannot be inlined"):
        instantiate(task, broken, sampler({}, {}, random.Random(0)))


def test_a_target_kind_no_policy_searches_is_refused_clearly(monkeypatch):
    import search.task

    monkeypatch.setattr(search.task, "searchable_kinds", lambda: ["cpu"])
    with pytest.raises(ValueError, match="no sketch rules for target kind 'cuda'"):
        SearchTask(Workload.op("matmul", M=8, N=8, K=8), "cuda -arch=sm_80")


def test_small_workloads_may_run_serially_large_ones_always_in_parallel():
    small = SearchTask(Workload.op("dense", M=1, N=128, K=128), "cpu")
    large = SearchTask(Workload.op("matmul", M=256, N=256, K=256), "cpu")
    for task, choices in ((small, {0, 1}), (large, {1})):
        (sketch, *_) = generate_sketches(task)
        space = decision_space(task, sketch)
        parallel = [d for name, d in space.items() if name.startswith("parallel:")]
        assert parallel and choices <= set(parallel[0].choices)
        assert (0 in parallel[0].choices) == (0 in choices)
    for sketch in generate_sketches(small):
        serial = {n: 0 for n in decision_space(small, sketch) if n.startswith("parallel:")}
        s, _ = instantiate(small, sketch, sampler(serial, {}, random.Random(0)))
        assert not any(step[0] == "parallel" for step in s.steps), sketch


def test_a_root_copy_keeps_its_innermost_loop_for_the_vector_lanes():
    """A GEMM operand copied into column panels at run time by a stage of its own: where a
    sampled program keeps the copy, it copies the 16-column panel rows as vectors and, at
    the root, runs the outer loops in parallel, never fusing the innermost loop into the
    parallel one (which left the copy scalar and 10x slower)."""
    x = te.placeholder((256, 256), name="X")
    b = te.placeholder((256, 256), name="B")
    panels = te.compute((16, 256, 16), lambda jo, k, ji: b[k, jo * 16 + ji], name="Bp")
    task = SearchTask(Workload.from_tensors([ops.dense_packed(x, panels)]), "cpu -isa=avx2")
    rng = random.Random(0)
    for sketch in generate_sketches(task):
        for _ in range(8):
            s, _ = instantiate(task, sketch, sampler({}, {}, rng))
            copy_steps = [step for step in s.steps if step[1] == "Bp"]
            if copy_steps == [["compute_inline", "Bp"]]:  # the GEMM reads B itself
                continue
            assert ["vectorize", "Bp", "ji"] in copy_steps, copy_steps
            at_root = not any(step[0] == "compute_at" for step in copy_steps)
            assert at_root <= any(step[0] == "parallel" for step in copy_steps), copy_steps
            assert not any(step[0] == "fuse" and "ji" in step[2] for step in copy_steps)


def test_a_bias_add_reading_a_broadcast_operand_is_inlined_into_the_conv():
    """The conv's bias add (a per-channel operand read at 0 on its size-1 dims) is inlined,
    so the conv tiles into its consumer, the residual add."""
    from schedule import ops

    data = te.placeholder((1, 2, 8, 8, 8), "float32", name="data")
    kernel = te.placeholder((1, 2, 1, 1, 8, 8), "float32", name="kernel")
    bias = te.placeholder((1, 1, 1, 1, 8), "float32", name="bias")
    residual = te.placeholder((1, 1, 8, 8, 8), "float32", name="residual")
    biased = ops.add(ops.conv2d_nchwc(data, kernel), bias, name="biased")
    out = ops.add(biased, residual, name="out")
    task = SearchTask(Workload.from_tensors([out]), "cpu")
    names = [str(s) for s in generate_sketches(task)]
    assert all("inline biased" in n for n in names), names
    assert any("tile conv fused@out" in n for n in names), names


def _imported_gelu_dense(erf_readers: int = 1) -> Workload:
    """``dense`` + bias + GELU as the ONNX importer writes it: ``x * (erf(x / c) + 1) * 0.5``
    with the constants as one-element tensors; ``erf_readers=2`` also adds ``erf`` to the
    output (each erf value then read twice)."""
    x = te.placeholder((8, 16), "float32", name="x")
    w = te.placeholder((32, 16), "float32", name="w")
    bias = te.placeholder((32,), "float32", name="bias")
    c, one, half = (te.placeholder((1,), "float32", name=n) for n in ("c", "one", "half"))
    biased = ops.add(ops.dense(x, w), bias, name="T_add")
    erf = te.compute(biased.shape, lambda i, j: te.erf(biased[i, j] / c[0]), name="T_erf")
    gelu = ops.multiply(ops.multiply(biased, ops.add(erf, one, name="T_add_1")), half,
                        name="T_gelu")
    out = ops.add(gelu, erf, name="T_out") if erf_readers == 2 else gelu
    return Workload.from_tensors([out])


def test_an_erf_read_once_is_inlined_so_the_dense_fuses_into_its_gelu():
    task = SearchTask(_imported_gelu_dense(), "cpu")
    names = [str(s) for s in generate_sketches(task)]
    assert all("inline T_erf" in n for n in names), names
    # the output multiplies by a scalar constant: not data reuse, so it is not tiled itself
    assert not any("tile T_gelu" in n for n in names), names
    assert any("fused@T_gelu" in n for n in names), names
    _check_every_sketch(task)


def test_an_erf_read_twice_stays_a_buffer():
    task = SearchTask(_imported_gelu_dense(erf_readers=2), "cpu")
    names = [str(s) for s in generate_sketches(task)]
    assert not any("inline T_erf" in n for n in names), names


def test_row_reductions_factor_per_row_and_fuse_into_the_output_row_loop():
    """Softmax over many rows: both reductions factor per row (vector partial results), and
    every stage can be computed inside the output's row loop (the exponentials have two
    consumers, the factored sum and the output), so one parallel loop makes all passes
    over a row while it is in cache."""
    wl = Workload.op("softmax", M=48, N=256)
    task = SearchTask(wl, "cpu")
    sketch = next(s for s in generate_sketches(task) if str(s).count("per row") == 2)
    fused = {"location:T_softmax_exp": 0, "location:T_softmax_expsum": 0,
             "location:T_softmax_maxelem": 0, "parallel:T_softmax_norm": 1}
    space = decision_space(task, sketch)  # by default the sum is at the root...
    assert space["location:T_softmax_exp"].choices == ("root", "inline")
    s, args = instantiate(task, sketch, sampler(dict(fused), space, random.Random(0)))
    # ...computed in the row loop, the exponentials may go there too (and no deeper): the
    # space keeps the wider choice, so mutation can propose it
    assert space["location:T_softmax_exp"].choices == ("root", "inline", 0)
    attached = {step[1]: step[2] for step in s.steps if step[0] == "compute_at"}
    assert attached == {"T_softmax_expsum.rf": "T_softmax_expsum",
                        "T_softmax_expsum": "T_softmax_norm",
                        "T_softmax_exp": "T_softmax_norm",
                        "T_softmax_maxelem.rf": "T_softmax_maxelem",
                        "T_softmax_maxelem": "T_softmax_exp"}
    mod = build(s, args)
    assert mod.source.count("#pragma omp parallel") == 1
    inputs = wl.random_inputs(seed=1)
    (expected,) = wl.reference(inputs)
    out = np.zeros_like(expected)
    mod(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-7)


def test_a_row_pass_may_prefetch_the_next_row_a_tiled_stage_never_does():
    """The exponentials computed at the softmax's row loop may fetch the next row of the
    input ahead (a decision), its row maximum's pass (no vector math to hide the fetch
    behind) not; the matmul's tiles, whose operands are reused from cache, are offered no
    prefetching."""
    wl = Workload.op("softmax", M=48, N=256)
    task = SearchTask(wl, "cpu")
    sketch = next(s for s in generate_sketches(task) if str(s).count("per row") == 2)
    fused = {"location:T_softmax_exp": 0, "location:T_softmax_expsum": 0,
             "location:T_softmax_maxelem": 0, "prefetch:T_softmax_exp": 1}
    space: dict = {}
    s, args = instantiate(task, sketch, sampler(dict(fused), space, random.Random(0)))
    assert space["prefetch:T_softmax_exp"].choices == (0, 1)
    assert "prefetch:T_softmax_maxelem.rf" not in space  # a pass that only streams
    assert ["prefetch", "T_softmax_exp", "data", 1] in s.steps
    mod = build(s, args)
    assert "__builtin_prefetch(&data[" in mod.source
    inputs = wl.random_inputs(seed=2)
    (expected,) = wl.reference(inputs)
    out = np.zeros_like(expected)
    mod(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-7)
    plain = {**fused, "prefetch:T_softmax_exp": 0}
    without, _ = instantiate(task, sketch, sampler(plain, {}, random.Random(0)))
    assert not any(step[0] == "prefetch" for step in without.steps)

    matmul = SearchTask(Workload.op("matmul", M=64, N=96, K=32), "cpu")
    for sketch in generate_sketches(matmul):
        assert not any(name.startswith("prefetch:") for name in decision_space(matmul, sketch))


def test_a_column_reduction_is_not_factored_per_row():
    x = te.placeholder((256, 64), "float32", name="x")
    k = te.reduce_axis((0, 256), name="k")
    col = te.compute((64,), lambda j: te.sum(x[k, j], axis=k), name="colsum")
    task = SearchTask(Workload.from_tensors([col]), "cpu")
    assert not any("per row" in str(s) for s in generate_sketches(task))


def test_a_matrix_vector_product_also_factors_each_dot_product_across_lanes():
    """A batch-1 dense layer reads both operands along its reduction: besides the tilings
    (which vectorize across outputs, reading the weights with a stride), each output's
    dot product may run across the vector lanes. Wide outputs, and a matmul whose second
    operand is read down its columns, keep the tilings only."""
    def names(op: str, **params) -> list[str]:
        return [str(s) for s in generate_sketches(SearchTask(Workload.op(op, **params),
                                                             "cpu"))]

    gemv = names("dense", M=1, N=128, K=128)
    assert "rfactor T_dense per row, location T_dense" in gemv
    assert any("tile T_dense" in n for n in gemv)
    # a block of rows per partial-result buffer, each row's lanes contiguous (one vector
    # accumulator per row, the rows' dot products interleaved in the reduction loop)
    wl = Workload.op("dense", M=1, N=48, K=96, bias=False)
    task = SearchTask(wl, "cpu")
    sketch = next(s for s in generate_sketches(task) if str(s).startswith("rfactor"))
    chosen = {"rfactor:T_dense": (16,), "rows:T_dense": (4,), "parallel:T_dense": 0,
              "unroll:T_dense": 0, "unroll:T_dense.rf": 0}
    s, args = instantiate(task, sketch, sampler(chosen, {}, random.Random(0)))
    text = str(lower(s, args))
    assert "allocate T_dense_rf: float32[1, 4, 16]" in text
    loop = text[text.index("for k.outer in 0..6:"):]
    assert loop.split("\n")[1].strip() == "for j in 0..4:"  # the block's rows inside it
    inputs = wl.random_inputs(seed=2)
    (expected,) = wl.reference(inputs)
    out = np.zeros_like(expected)
    build(s, args)(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert not any("rfactor" in n for n in names("dense", M=128, N=768, K=768))
    assert not any("rfactor" in n for n in names("matmul", M=1, N=128, K=128))


def test_the_register_tile_runs_its_largest_axis_outermost():
    """Inside the innermost tile (unrolled into registers) the axes run largest first, the
    vector axis last: a value loaded for the smaller axes (a conv's two weight vectors) is
    then reused by consecutive statements instead of a value of the larger axis (14 input
    broadcasts) staying live across all of them (GCC spilled such tiles)."""
    data = te.placeholder((1, 2, 16, 16, 16), "float32", name="data")
    kernel = te.placeholder((4, 2, 1, 1, 16, 16), "float32", name="kernel")
    out = ops.conv2d_nchwc(data, kernel)
    task = SearchTask(Workload.from_tensors([out]), "cpu")
    (sketch,) = [sk for sk in generate_sketches(task) if str(sk) == f"tile {out.op.name}"]
    chosen = {"tile:conv:ko": (1, 1, 2), "tile:conv:ow": (1, 1, 8), "tile:conv:ki": (1, 1, 16)}

    def decide(name, decision):
        if name in chosen:
            return chosen[name]
        return decision.choices[0] if isinstance(decision, ChoiceDecision) else \
            (1,) * decision.parts

    s, args = instantiate(task, sketch, decide)
    innermost = [iv.name.split(".")[0] for iv in s[out.op.name].leaf_iter_vars[-5:]
                 if iv.extent > 1]
    assert innermost == ["ow", "ko", "ki"], innermost
    _check_every_sketch(task)


def _winograd_layer(tile: int = 4) -> tuple[te.Tensor, te.Tensor]:
    """The two transforms of a packed 3x3 conv by Winograd's algorithm: the input's, and
    the output's (of the products) with a bias and ReLU after it, as the IR fuses them."""
    data = te.placeholder((1, 1, 8, 8, 8), "float32", name="data")
    tiles = ops.winograd_input_nchwc(data, tile, 1)
    products = te.placeholder(tiles.shape, "float32", name="products")
    bias = te.placeholder((1, 1, 1, 1, 8), "float32", name="bias")
    biased = ops.add(ops.winograd_output_nchwc(products, tile, (8, 8), 8), bias,
                     name="biased")
    return tiles, ops.relu(biased)


def test_a_stage_choosing_its_sum_by_position_unrolls_the_positions():
    """Winograd's input transform chooses one of 36 sums by its first axis, the output
    transform one of 16 by each pixel's position in its 4x4 tile: those positions run
    unrolled right outside the vector lanes (each copy's choice known when compiled), and
    the output transform is inlined into the ReLU after it."""
    from search import analysis

    tiles, out = _winograd_layer()
    task = SearchTask(Workload.from_tensors([tiles]), "cpu")
    s, _ = instantiate(task, generate_sketches(task)[0], sampler({}, {}, random.Random(0)))
    stage = s[tiles.op.name]
    assert analysis.branch_axes(stage, s) == {0: 36}
    assert [iv.name for iv in stage.leaf_iter_vars][-2:] == ["e", "c"]
    assert ["unroll", tiles.op.name, "e"] in s.steps
    _check_every_sketch(task)

    task = SearchTask(Workload.from_tensors([out]), "cpu")
    sketches = generate_sketches(task)
    assert all("inline winograd_output" in str(sk) for sk in sketches)
    s, _ = instantiate(task, sketches[0], sampler({}, {}, random.Random(0)))
    assert analysis.branch_axes(s[out.op.name], s) == {2: 4, 3: 4}
    unrolled = [step[2] for step in s.steps if step[:2] == ["unroll", out.op.name]]
    assert unrolled == ["ax2.inner", "ax3.inner"], s.steps
    _check_every_sketch(task)


def test_padding_and_concatenation_are_not_branches_to_unroll():
    from search import analysis

    x = te.placeholder((1, 4, 6, 6), "float32", name="x")
    y = te.placeholder((1, 4, 6, 6), "float32", name="y")
    for out in (ops.pad(x, (0, 0, 1, 1), (0, 0, 1, 1)), ops.concatenate([x, y], axis=1)):
        s = te.create_schedule([out])
        assert analysis.branch_axes(s[out], s) == {}


def _packed_max_pool() -> Workload:
    data = te.placeholder((1, 4, 12, 12, 16), "float32", name="data")
    return Workload.from_tensors([ops.max_pool2d(data, 3, 2, 1)])


def test_a_pooling_window_runs_outside_the_vector_lanes():
    """The window loops of a packed max pool run just outside its channel lanes, so a vector
    of outputs is reduced at once; a softmax's row maximum and sum (which read along the
    row, not the lanes, or have their per-row partial results computed at the row loop)
    keep their order."""
    task = SearchTask(_packed_max_pool(), "cpu")
    for sketch in generate_sketches(task):
        s, _ = instantiate(task, sketch, sampler({"location:pad": "inline"}, {},
                                                 random.Random(0)))
        stage = s["pool_max"]
        names = [iv.name for iv in stage.leaf_iter_vars]
        assert names[-3:] == ["ry", "rx", "ax4"], names
        assert ["vectorize", "pool_max", "ax4"] in s.steps
    _check_every_sketch(task)
    task = SearchTask(Workload.op("softmax", M=48, N=256), "cpu")
    sketches = generate_sketches(task)
    assert any("per row" in str(sketch) for sketch in sketches)
    for sketch in sketches:
        s, _ = instantiate(task, sketch, sampler({}, {}, random.Random(0)))
        reordered = {step[1] for step in s.steps if step[0] == "reorder"}
        assert not reordered & {"T_softmax_maxelem", "T_softmax_expsum"}, sketch


def test_a_parallel_loop_counts_loops_of_more_than_one_iteration():
    """Batch 1: "one parallel loop" fuses the batch loop with the next, never runs the
    single batch iteration in parallel."""
    task = SearchTask(_packed_max_pool(), "cpu")
    for sketch in generate_sketches(task):
        s, _ = instantiate(task, sketch, sampler({"parallel:pool_max": 1}, {},
                                                 random.Random(0)))
        (step,) = [st for st in s.steps if st[0] == "parallel"]
        assert step[2] == "ax0.ax1.fused", s.steps


def test_a_batch_of_one_runs_the_rows_in_parallel_around_a_per_row_reduction():
    """BERT's layer norm, (1, 128, 768): with its variance computed per row (at the row
    loop) the rows run in parallel, not the single batch iteration."""
    x = te.placeholder((1, 128, 768), "float32", name="x")
    gamma = te.placeholder((768,), "float32", name="gamma")
    beta = te.placeholder((768,), "float32", name="beta")
    wl = Workload.from_tensors([ops.layer_norm(x, gamma, beta)])
    task = SearchTask(wl, "cpu")
    inputs = wl.random_inputs(seed=0)
    (expected,) = wl.reference(inputs)
    found = 0
    for sketch in generate_sketches(task):
        for seed in range(8):
            s, args = instantiate(task, sketch, sampler({"parallel:T_layer_norm": 1}, {},
                                                        random.Random(seed)))
            if ["compute_at", "T_layer_norm_varsum", "T_layer_norm", "ax1"] not in s.steps:
                continue
            found += 1
            assert ["parallel", "T_layer_norm", "ax1"] in s.steps, s.steps
            out = np.zeros(expected.shape, expected.dtype)
            build(s, args)(*inputs, out)
            np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-4)
    assert found


def test_a_reduction_is_never_computed_where_it_would_be_redone_for_the_same_values():
    """A row's maximum and sum are computed at the output's row loop or at the root, never
    inside the loop over the row's elements (where each iteration would reduce the whole row
    again); a convolution's padding, an element-wise stage, keeps its deeper locations."""
    softmax = SearchTask(Workload.op("softmax", M=8, N=256), "cpu")
    for sketch in generate_sketches(softmax):
        space = decision_space(softmax, sketch)
        for name in ("location:T_softmax_maxelem", "location:T_softmax_expsum"):
            if name in space:
                assert set(space[name].choices) <= {"root", 0}, (name, space[name])
    conv = SearchTask(Workload.op("conv2d_nchw", N=1, C=16, H=14, W=14, K=16, R=3, S=3,
                                  padding=1), "cpu")
    depths = {c for sketch in generate_sketches(conv)
              for c in decision_space(conv, sketch)["location:pad"].choices}
    assert {0, 1, 2} <= depths
