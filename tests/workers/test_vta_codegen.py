"""Code generation for ``vta`` from schedules: int8 dense layers with requantization,
scheduled by the template (tiles, tensorize, buffers, virtual threads) and lowered to the
accelerator's instructions, match numpy exactly on the simulator; virtual threads give the
same outputs in fewer cycles; schedules the accelerator cannot run are refused with a
message saying why."""

from __future__ import annotations

import re

import numpy as np
import pytest

from schedule import ScheduleError, Workload, build, lower, te
from schedule.loop_ir import For, walk_stmts
from schedule.ops import get_op
from schedule.vta import (
    IsaError,
    Packing,
    Template,
    VtaCodegenError,
    VtaCompute,
    VtaConfig,
    VtaProgram,
    VtaUnsupported,
    compile_workload,
)
from workers.vta import SimulationError, Simulator

CONFIG = VtaConfig()


def dense(m: int, n: int, k: int, shift: int = 6) -> Workload:
    return Workload.op("dense", M=m, N=n, K=k, dtype="int8", bias=False, requant_shift=shift)


def run(workload: Workload, template: Template, config: VtaConfig = CONFIG
        ) -> tuple[np.ndarray, np.ndarray, int, VtaProgram]:
    """The accelerator's output, numpy's, the simulated cycles and the program."""
    compute = VtaCompute(workload, config)
    _, program = compile_workload(workload, compute.template_steps(template), config)
    inputs = workload.random_inputs(3)
    dram = program.dram_image(compute.pack_inputs(inputs), config)
    result = Simulator(config).run(program.instructions, dram)
    out = compute.unpack_output(program.output(result.dram, config))
    (expected,) = workload.reference(inputs)
    return out, expected, result.cycles, program


@pytest.mark.parametrize("template", [
    Template(), Template(2, 2, 2), Template(4, 4, 4), Template(2, 2, 2, 2, "n"),
    Template(2, 1, 4, 2, "m"), Template(1, 4, 1, 2, "m"),
])
def test_dense_on_vta_matches_numpy_exactly(template: Template) -> None:
    out, expected, cycles, _ = run(dense(4, 64, 64), template)
    assert out.dtype == np.int8 and np.array_equal(out, expected)
    assert cycles > 0


def test_odd_shapes_are_padded_on_the_host_and_cropped() -> None:
    workload = dense(5, 40, 72, shift=3)  # 5 x 3 x 5 blocks after padding
    out, expected, _, program = run(workload, Template(5, 3, 5, 1))
    assert out.shape == (5, 40) and np.array_equal(out, expected)
    assert [a.shape for a in program.args] == [[5, 5, 1, 16], [3, 5, 16, 16], [5, 3, 1, 16]]
    assert 0 < np.abs(expected.astype(int)).max() < 128  # the requantization did something


def test_packing_round_trips() -> None:
    packing = Packing((5, 40), (1, 16))
    x = np.arange(200, dtype=np.int32).reshape(5, 40)
    packed = packing.pack(x)
    assert packed.shape == (5, 3, 1, 16) and packed[0, 2, 0, 8:].tolist() == [0] * 8
    assert np.array_equal(packing.unpack(packed), x)


def test_virtual_threads_give_the_same_output_in_fewer_cycles() -> None:
    workload = dense(16, 256, 256)
    plain = run(workload, Template(16, 4, 8, 1))
    latency_hidden = run(workload, Template(16, 4, 8, 2, "n"))
    assert np.array_equal(plain[0], plain[1]) and np.array_equal(latency_hidden[0], plain[1])
    assert latency_hidden[2] < 0.9 * plain[2]
    assert run(workload, Template())[2] > 10 * latency_hidden[2]  # the untuned default


def test_program_lists_and_round_trips_as_json() -> None:
    _, _, _, program = run(dense(4, 32, 32), Template(2, 1, 2, 2, "n"))
    text = str(program)
    for word in ("LOAD uop", "LOAD inp", "LOAD wgt", "GEMM reset", "ALU shr imm=6",
                 "ALU max imm=-128", "ALU min imm=127", "STORE out", "FINISH", "pop prev"):
        assert word in text
    again = VtaProgram.from_json(program.dumps())
    assert str(again) == text and again.uops == program.uops
    stats = program.stats(CONFIG)
    assert stats["gemm_ops"] == 4 * 2 * 2 and stats["by_kind"]["finish"] == 1
    with pytest.raises(IsaError, match="JSON"):
        VtaProgram.from_json(b"{")
    with pytest.raises(IsaError, match="malformed"):
        VtaProgram.from_json({"instructions": []})
    with pytest.raises(IsaError, match="at most"):
        VtaProgram.from_json({"instructions": [{}] * 1_000_001})


def test_a_schedule_over_a_buffers_capacity_is_invalid() -> None:
    workload = dense(1, 1024, 1024)
    compute = VtaCompute(workload, CONFIG)
    with pytest.raises(VtaCodegenError, match=r"the wgt buffer holds 1024 entries .*needs 4096"):
        compile_workload(workload, compute.template_steps(Template(1, 64, 64)), CONFIG)
    with pytest.raises(ScheduleError, match="does not divide"):
        compute.template_steps(Template(3, 1, 1))


def test_what_the_accelerator_cannot_run_is_refused_with_the_reason() -> None:
    workload = dense(4, 32, 32)
    compute = VtaCompute(workload, CONFIG)
    steps = list(compute.template_steps(Template(2, 2, 2)))
    untensorized = [s for s in steps if s[0] != "tensorize"]
    with pytest.raises(VtaCodegenError, match="without the GEMM intrinsic"):
        compile_workload(workload, untensorized, CONFIG)
    with pytest.raises(VtaCodegenError, match="neither copied into an inp / wgt buffer"):
        compile_workload(workload, [], CONFIG)
    with pytest.raises(VtaUnsupported, match="stays on the host cpu"):
        VtaCompute(Workload.op("batch_matmul", B=2, M=4, N=32, K=32, dtype="int8"), CONFIG)
    with pytest.raises(VtaUnsupported, match="requant_shift >= 0"):
        VtaCompute(Workload.op("matmul", M=4, N=32, K=32, dtype="int8"), CONFIG)


@pytest.mark.parametrize(("transpose_a", "transpose_b"), [(False, False), (True, True)])
def test_int8_matmul_on_vta_matches_numpy(transpose_a: bool, transpose_b: bool) -> None:
    workload = Workload.op("matmul", M=6, N=40, K=48, transpose_a=transpose_a,
                           transpose_b=transpose_b, dtype="int8", requant_shift=4)
    same, _, _ = run_op(workload, Template(3, 1, 3, 2, "m"))
    assert same


def test_tensorized_loops_lower_as_such_and_have_no_cpu_code() -> None:
    compute = VtaCompute(dense(4, 32, 32), CONFIG)
    s = compute.schedule(compute.template_steps(Template(2, 2, 2)))
    func = lower(s, compute.tensors, unroll=False)
    kinds = [st.kind for st in walk_stmts(func.body) if isinstance(st, For)]
    assert kinds.count(For.TENSORIZED) == 2  # the reset and the update
    with pytest.raises(ScheduleError, match="no CPU code generation"):
        build(s, compute.tensors)


def test_set_scope_is_a_replayable_step_for_intermediates_only() -> None:
    a = te.placeholder((4, 16), "int32", name="a")
    b = te.compute((4, 16), lambda i, j: a[i, j] + 1, name="b")
    c = te.compute((4, 16), lambda i, j: b[i, j] * 2, name="c")
    s = te.create_schedule(c)
    s[b].set_scope("acc")
    assert s.steps[-1] == ["set_scope", "b", "acc"]
    with pytest.raises(ScheduleError, match="inputs and outputs stay in memory"):
        s[c].set_scope("acc")
    with pytest.raises(ScheduleError, match="unknown scope"):
        s[b].set_scope("dram")


def test_requantized_dense_runs_on_the_cpu_too() -> None:
    from schedule import make_schedule
    from workers.reference import compare_outputs

    workload = dense(3, 20, 24, shift=2)
    s, args = make_schedule(workload, [])
    module = build(s, args)
    inputs = workload.random_inputs(1)
    out = np.zeros((3, 20), np.int8)
    module(*inputs, out)
    assert compare_outputs([out.tobytes()], workload.reference(inputs)) == ""


def test_a_program_with_its_tokens_removed_races_or_deadlocks_not_silently_passes() -> None:
    """The tokens are what makes the overlapped program correct: without its pops the
    simulator computes what such hardware would (here: a different result or an error)."""
    from dataclasses import replace

    from schedule.vta import Deps

    workload = dense(16, 256, 256)
    compute = VtaCompute(workload, CONFIG)
    _, program = compile_workload(workload, compute.template_steps(Template(16, 4, 8, 2)),
                                  CONFIG)
    assert any(i.deps.pop_prev or i.deps.pop_next for i in program.instructions)
    stripped = [replace(i, deps=Deps(push_prev=i.deps.push_prev, push_next=i.deps.push_next))
                for i in program.instructions]
    dram = program.dram_image(compute.pack_inputs(workload.random_inputs(0)), CONFIG)
    try:
        result = Simulator(CONFIG).run(stripped, dram)
    except SimulationError as err:
        assert err.kind == "deadlock"
    else:
        expected = get_op("dense").reference(workload.random_inputs(0), workload.params)
        assert not np.array_equal(compute.unpack_output(program.output(result.dram, CONFIG)),
                                  expected)


def conv(c: int, hw: int, k: int, r: int, stride: int, pad: int, shift: int = 7) -> Workload:
    return Workload.op("conv2d_nchw", N=1, C=c, H=hw, W=hw, K=k, R=r, S=r, stride=stride,
                       padding=pad, dtype="int8", requant_shift=shift)


def run_op(workload: Workload, template: Template) -> tuple[bool, int, VtaProgram]:
    """Whether the accelerator's output equals numpy's, the cycles and the program."""
    out, expected, cycles, program = run(workload, template)
    return bool(np.array_equal(out, expected)), cycles, program


@pytest.mark.parametrize(("workload", "template"), [
    (conv(32, 8, 32, 3, 1, 1), Template()),
    (conv(32, 8, 32, 3, 1, 1), Template(1, 2, 1, 2, "h", 2, 4)),
    (conv(32, 8, 32, 3, 1, 1), Template(1, 1, 2, 2, "n", 4, 8)),
    (conv(16, 9, 32, 3, 2, 1), Template(1, 2, 1, 1, "n", 5, 5)),  # stride 2, odd size
    (conv(32, 8, 48, 1, 2, 0), Template(1, 3, 2, 1, "n", 2, 4)),  # 1x1, stride 2
    (conv(20, 7, 24, 5, 1, 2), Template(1, 1, 1, 2, "n", 7, 7)),  # channels padded
])
def test_conv2d_on_vta_matches_numpy_exactly(workload: Workload, template: Template) -> None:
    same, cycles, program = run_op(workload, template)
    assert same and cycles > 0
    padded = any(i.pad != (0, 0, 0, 0) for i in program.instructions
                 if type(i).__name__ == "Load")
    assert padded == (workload.params["padding"] != [0, 0])  # the DMA writes the zeros


def test_a_resnet_layer_tiled_with_virtual_threads_keeps_the_core_busy() -> None:
    workload = conv(64, 56, 64, 3, 1, 1)
    compute = VtaCompute(workload, CONFIG)
    ideal = compute.macs / CONFIG.macs_per_cycle
    same, tuned, _ = run_op(workload, Template(1, 2, 2, 2, "n", 14, 28))
    assert same and ideal / tuned > 0.7
    same, default, _ = run_op(workload, compute.default_template())
    assert same and default > 1.5 * tuned


def test_each_lane_loads_a_reduction_step_together_so_its_loads_never_wait_behind() -> None:
    """A 3x3 conv, output channels in two lanes, the reduction in steps of 32 channels:
    one lane's input and weight loads are consecutive in the load module's in-order queue,
    so the input load waiting for the other lane's GEMM cannot hold up this lane's weights
    (interleaved load by load, the core idled a whole load per step: 81.7% busy)."""
    workload = conv(128, 14, 64, 3, 1, 1)
    ideal = VtaCompute(workload, CONFIG).macs / CONFIG.macs_per_cycle
    same, cycles, program = run_op(workload, Template(1, 2, 2, 2, "n", 14, 14))
    assert same and ideal / cycles > 0.9
    _, _, one_lane = run_op(workload, Template(1, 2, 2, 1, "n", 14, 14))

    def input_runs(p: VtaProgram) -> set[int]:
        """The lengths of the runs of consecutive input loads."""
        kinds = "".join(str(i.mem)[-3:].lower() for i in p.instructions
                        if type(i).__name__ == "Load" and str(i.mem)[-3:].lower() != "uop")
        return {len(run) // 3 for run in re.findall(r"(?:inp)+", kinds)}

    assert input_runs(program) == input_runs(one_lane)  # one lane's step, then the other's
    # the second lane's reset waits for its last store: it comes after the first lane's GEMM
    gemms = ["reset" if i.reset else "gemm" for i in program.instructions
             if type(i).__name__ == "Gemm"]
    assert gemms[:3] == ["reset", "gemm", "reset"]


@pytest.mark.parametrize(("workload", "template"), [
    (Workload.op("dense", M=4, N=64, K=64, dtype="int8", requant_shift=5), Template(2, 2, 2)),
    (Workload.op("dense", M=4, N=48, K=32, dtype="int8", requant_shift=4, activation="relu"),
     Template(1, 3, 2, 1)),
    (Workload.op("dense", M=8, N=64, K=32, dtype="int8", requant_shift=4, activation="relu"),
     Template(2, 2, 1, 2, "n")),
    (Workload.op("conv2d_nchw", N=1, C=32, H=8, W=8, K=64, R=3, S=3, padding=1, bias=True,
                 activation="relu", dtype="int8", requant_shift=6),
     Template(1, 1, 1, 2, "n", 4, 8)),
    (Workload.op("conv2d_nchw", N=1, C=16, H=9, W=9, K=32, R=1, S=1, stride=2, bias=True,
                 dtype="int8", requant_shift=3), Template(1, 2, 1, 1, "n", 5, 5)),
])
def test_a_layers_bias_and_relu_run_on_the_alu(workload: Workload, template: Template) -> None:
    """The bias is loaded into the accumulator buffer per output tile and added there; the
    ReLU is an ALU max; the output equals numpy's layer (random biases in -8..8 and, to
    exercise them, large ones)."""
    compute = VtaCompute(workload, CONFIG)
    _, program = compile_workload(workload, compute.template_steps(template), CONFIG)
    loads = [i for i in program.instructions if type(i).__name__ == "Load"]
    assert any(str(i.mem).lower().endswith("acc") for i in loads)
    for seed, scale in ((3, 1), (4, 3000)):
        inputs = workload.random_inputs(seed)
        inputs[2] = (inputs[2].astype(np.int64) * scale).astype(np.int32)
        dram = program.dram_image(compute.pack_inputs(inputs), CONFIG)
        result = Simulator(CONFIG).run(program.instructions, dram)
        out = compute.unpack_output(program.output(result.dram, CONFIG))
        (expected,) = workload.reference(inputs)
        assert np.array_equal(out, expected)
        if workload.params["activation"] == "relu":
            assert out.min() >= 0 and (expected > 0).any()


def test_what_a_conv_needs_that_vta_lacks_is_said() -> None:
    with pytest.raises(VtaUnsupported, match="groups=1"):
        VtaCompute(Workload.op("conv2d_nchw", N=1, C=32, H=8, W=8, K=32, R=3, S=3, groups=2,
                               dtype="int8", requant_shift=4), CONFIG)
    with pytest.raises(VtaUnsupported, match="requant_shift >= 0"):
        VtaCompute(Workload.op("conv2d_nchw", N=1, C=32, H=8, W=8, K=32, R=3, S=3,
                               dtype="int8"), CONFIG)
