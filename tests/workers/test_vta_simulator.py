"""The ``vta`` simulator: every instruction against a numpy reference, a whole int8 matmul
program against numpy, overlap through tokens (double-buffered weights) giving the same
outputs in fewer cycles, and the programs it refuses (deadlock, overflow, bad micro-ops,
DRAM out of range, malformed programs)."""

from __future__ import annotations

import numpy as np
import pytest

from schedule.vta import (
    Alu,
    AluOp,
    Deps,
    DramImage,
    Finish,
    Gemm,
    IsaError,
    Load,
    Loops,
    Store,
    Uop,
    VtaConfig,
    VtaConfigError,
    from_json,
    matmul_kernel,
    pack_uops,
    to_json,
)
from workers.vta import SimulationError, Simulator, VtaState

CONFIG = VtaConfig()  # 1x16x16, VTA's buffers, Pynq-like clock and bus
RNG = np.random.default_rng(0)


def int8(*shape: int) -> np.ndarray:
    return RNG.integers(-128, 128, size=shape, dtype=np.int8)


# ---------------------------------------------------------------------- each instruction
def test_load_pads_with_zeros_and_reads_strided_rows() -> None:
    dram = DramImage()
    rows = int8(5, 7, 16)  # 5 rows of 7 input entries
    base = dram.put(rows, CONFIG.inp_entry_bytes)
    state = VtaState(CONFIG, dram.array())
    state.load(0, Load("inp", 10, base + 1, 3, 4, 7, pad=(1, 2, 2, 1)))
    tile = np.pad(rows[:3, 1:5], ((1, 2), (2, 1), (0, 0)))
    np.testing.assert_array_equal(state.inp[10:10 + tile.shape[0] * tile.shape[1]],
                                  tile.reshape(-1, 1, 16))
    assert not state.inp[:10].any()

    weights = int8(3, 16, 16)
    acc = RNG.integers(-2**31, 2**31, size=(2, 1, 16), dtype=np.int64).astype(np.int32)
    uops = [Uop(1, 2, 3), Uop(2047, 2047, 1023)]
    bases = (dram.put(weights, CONFIG.wgt_entry_bytes), dram.put(acc, CONFIG.acc_entry_bytes),
             dram.put(pack_uops(uops), 4))
    state = VtaState(CONFIG, dram.array())
    state.load(0, Load("wgt", 5, bases[0], 1, 3, 3))
    state.load(1, Load("acc", 7, bases[1], 1, 2, 2))
    state.load(2, Load("uop", 0, bases[2], 1, 2, 2))
    np.testing.assert_array_equal(state.wgt[5:8], weights)
    np.testing.assert_array_equal(state.acc[7:9], acc)
    np.testing.assert_array_equal(state.out[7:9], acc.astype(np.int8))  # the int8 mirror
    assert [tuple(u) for u in state.uop[:2].tolist()] == [(1, 2, 3), (2047, 2047, 1023)]


def _reference_gemm(acc, inp, wgt, uops, loops, reset):
    acc = acc.astype(np.int64)
    for i in range(loops.iter_out):
        for j in range(loops.iter_in):
            for u in uops[loops.uop_bgn:loops.uop_end]:
                d = u.dst + i * loops.dst_out + j * loops.dst_in
                s = u.src + i * loops.src_out + j * loops.src_in
                w = u.wgt + i * loops.wgt_out + j * loops.wgt_in
                acc[d] = 0 if reset else acc[d] + inp[s].astype(np.int64) @ \
                    wgt[w].astype(np.int64).T
    return ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)


@pytest.mark.parametrize("reset", [False, True])
def test_gemm_follows_its_two_loops_over_the_micro_ops(reset: bool) -> None:
    state = VtaState(CONFIG, np.zeros(64, np.uint8))
    state.inp[:64] = int8(64, 1, 16)
    state.wgt[:32] = int8(32, 16, 16)
    state.acc[:64] = RNG.integers(-2**31, 2**31, size=(64, 1, 16)).astype(np.int32)
    state.out[:64] = state.acc[:64].astype(np.int8)  # as if loaded: the mirror agrees
    uops = [Uop(0, 0, 0), Uop(0, 1, 1), Uop(1, 2, 0)]  # two updates of acc 0: in order
    state.uop[:3] = [[u.dst, u.src, u.wgt] for u in uops]
    loops = Loops(0, 3, iter_out=3, iter_in=4, dst_out=8, dst_in=2, src_out=16, src_in=3,
                  wgt_out=4, wgt_in=1)
    expected = _reference_gemm(state.acc.copy(), state.inp, state.wgt, uops, loops, reset)
    state.gemm(0, Gemm(loops, reset=reset))
    np.testing.assert_array_equal(state.acc, expected)
    np.testing.assert_array_equal(state.out, expected.astype(np.int8))


@pytest.mark.parametrize("op", list(AluOp))
@pytest.mark.parametrize("imm", [None, 3, -2])
def test_alu_operations_wrap_like_32_bit_hardware(op: AluOp, imm: int | None) -> None:
    state = VtaState(CONFIG, np.zeros(64, np.uint8))
    state.acc[:8] = RNG.integers(-2**31, 2**31, size=(8, 1, 16)).astype(np.int32)
    state.acc[4:8] = RNG.integers(-40, 40, size=(4, 1, 16)).astype(np.int32)  # shift amounts
    before = state.acc.astype(np.int64)
    state.uop[0] = [0, 4, 0]
    state.alu(0, Alu(op, Loops(0, 1, iter_out=2, iter_in=2, dst_out=2, dst_in=1, src_out=2,
                                src_in=1), imm=imm))
    a = before[:4]
    b = np.int64(imm) if imm is not None else before[4:8]
    if op is AluOp.SHR:
        shift = np.clip(b, -31, 31)
        want = np.where(shift >= 0, a >> np.maximum(shift, 0), a << np.maximum(-shift, 0))
    else:
        want = {AluOp.MIN: np.minimum, AluOp.MAX: np.maximum, AluOp.ADD: np.add,
                AluOp.MUL: np.multiply}[op](a, b)
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)
    np.testing.assert_array_equal(state.acc[:4], want)
    np.testing.assert_array_equal(state.acc[4:], before[4:].astype(np.int32))
    np.testing.assert_array_equal(state.out[:4], want.astype(np.int8))


def test_store_writes_the_int8_output_rows() -> None:
    dram = DramImage()
    base = dram.reserve(3 * 5, CONFIG.out_entry_bytes)
    state = VtaState(CONFIG, dram.array())
    state.acc[:6] = RNG.integers(-1000, 1000, size=(6, 1, 16)).astype(np.int32)
    state.out[:6] = state.acc[:6].astype(np.int8)
    state.store(0, Store(0, base + 1, 2, 3, 5))
    got = state.dram.view(np.int8).reshape(3, 5, 16)
    np.testing.assert_array_equal(got[:2, 1:4], state.out[:6].reshape(2, 3, 16))
    assert not got[2].any() and not got[:, 0].any() and not got[:, 4].any()


# ---------------------------------------------------------------------- whole programs
def _matmul(m: int, k: int, n: int, weight_buffers: int, shift: int = 8):
    """A hand-written int8 matmul kernel and the numpy result it must give."""
    a, w = int8(m, k), int8(n, k)
    kernel = matmul_kernel(a, w, CONFIG, shift, weight_buffers)
    want = np.clip((a.astype(np.int64) @ w.astype(np.int64).T) >> shift, -128, 127)
    return kernel, want.astype(np.int8)


def test_an_int8_matmul_program_matches_numpy_and_reports_its_cycles() -> None:
    kernel, want = _matmul(m=8, k=64, n=48, weight_buffers=1)
    result = Simulator(CONFIG).run(kernel.program, kernel.dram)
    np.testing.assert_array_equal(kernel.output(result.dram, CONFIG), want)
    stats = result.stats
    assert stats["gemm_ops"] == 8 * 3 * 4 + 8 * 3  # updates, and the resets
    assert stats["wgt_load_bytes"] == 48 * 64 and stats["out_store_bytes"] == 8 * 48
    assert 0 < stats["gemm_utilization"] < 1 and result.cycles > stats["gemm_ops"]
    assert result.seconds == pytest.approx(result.cycles / 100e6)
    prog = kernel.program
    assert str(prog[2]) == "LOAD wgt sram=0 dram=2 1x4 stride=4  [push next]"
    assert str(prog[4]) == ("GEMM uops [0,4) x 8 x 1 dst+=3,0 src+=4,0 wgt+=0,0  "
                            "[pop prev, push prev]")


def test_double_buffered_weights_overlap_loads_with_compute() -> None:
    runs = {}
    for buffers in (1, 2):
        kernel, want = _matmul(m=32, k=256, n=128, weight_buffers=buffers)
        result = Simulator(CONFIG).run(kernel.program, kernel.dram)
        np.testing.assert_array_equal(kernel.output(result.dram, CONFIG), want)
        runs[buffers] = result
    serial, overlapped = runs[1], runs[2]
    assert serial.stats["gemm_ops"] == overlapped.stats["gemm_ops"]
    # the same work; with two buffers the weight loads hide behind the GEMMs
    assert overlapped.cycles < 0.8 * serial.cycles
    assert overlapped.stats["gemm_utilization"] > serial.stats["gemm_utilization"]


def test_the_shared_dram_port_serialises_transfers() -> None:
    dram = DramImage()
    base = dram.put(int8(64, 16, 16), CONFIG.wgt_entry_bytes)
    out = dram.reserve(64, CONFIG.out_entry_bytes)
    # a weight load (load module) and a store (store module) with no tokens between them
    prog = [Load("wgt", 0, base, 1, 64, 64), Store(0, out, 1, 64, 64), Finish()]
    result = Simulator(CONFIG).run(prog, dram.array())
    wgt_transfer = 64 * 256 // CONFIG.bus_bytes
    store_transfer = 64 * 16 // CONFIG.bus_bytes
    assert result.cycles >= wgt_transfer + store_transfer  # one port: not side by side
    assert result.stats["dram_port_cycles"] == wgt_transfer + store_transfer + 2 * 2


# ---------------------------------------------------------------------- refused programs
def test_a_token_nobody_pushes_is_a_deadlock() -> None:
    prog = [Gemm(Loops(0, 1), deps=Deps(pop_prev=True)), Finish()]
    with pytest.raises(SimulationError, match="deadlock: compute instruction 0 .* waits for "
                                              "a load->compute token") as err:
        Simulator(CONFIG).run(prog, np.zeros(16, np.uint8))
    assert err.value.kind == "deadlock"


def test_a_full_command_queue_behind_a_waiting_instruction_is_a_deadlock() -> None:
    # compute waits for a token the load module pushes only after nine compute
    # instructions that fetch cannot queue (eight entries) behind the waiting one
    prog = ([Gemm(Loops(0, 1), deps=Deps(pop_prev=True))] +
            [Gemm(Loops(0, 1)) for _ in range(9)] +
            [Load("inp", 0, 0, 1, 1, 1, deps=Deps(push_next=True)), Finish()])
    with pytest.raises(SimulationError, match="fetch waits for room in the compute command "
                                              "queue"):
        Simulator(CONFIG).run(prog, np.zeros(16, np.uint8))


@pytest.mark.parametrize("prog, kind, message", [
    ([Load("inp", 2047, 0, 1, 2, 2), Finish()], "buffer_overflow", "inp buffer entry 2048"),
    ([Load("inp", 0, 0, 1, 2, 2, pad=(0, 0, 0, 0)), Finish()], "dram_range",
     "DRAM entry 1 is past"),
    ([Gemm(Loops(0, 8193)), Finish()], "bad_uop", "micro-ops up to 8193"),
    ([Gemm(Loops(0, 1, iter_out=3000, dst_out=1)), Finish()], "bad_uop",
     "dst reaches entry 2999 of 2048"),
    ([Store(2040, 0, 1, 9, 9), Finish()], "buffer_overflow", "out buffer entry 2048"),
    ([Load("inp", 0, 0, 1, 1, 1, deps=Deps(pop_prev=True)), Finish()], "bad_program",
     "load module has no prev module"),
    ([Load("inp", 0, 0, 1, 1, 1)], "bad_program", "ends with FINISH"),
])
def test_bad_programs_are_refused_with_the_reason(prog, kind, message) -> None:
    with pytest.raises(SimulationError, match=message) as err:
        Simulator(CONFIG).run(prog, np.zeros(16, np.uint8))
    assert err.value.kind == kind


# ---------------------------------------------------------------------- the data types
def test_instructions_round_trip_through_json_and_bad_fields_are_named() -> None:
    prog = [Load("inp", 1, 2, 3, 4, 5, (1, 0, 1, 0), Deps(pop_next=True)),
            Store(0, 9, 1, 2, 2, Deps(push_prev=True)),
            Gemm(Loops(0, 2, 3, 4, 1, 2, 3, 4, 5, 6), reset=True),
            Alu("shr", Loops(0, 1), imm=-3), Alu("add", Loops(1, 2)), Finish()]
    assert [from_json(to_json(p)) for p in prog] == prog
    for bad, match in ((lambda: Load("out", 0, 0, 1, 1, 1), "out is stored"),
                       (lambda: Load("inp", 0, 0, 1, 4, 2), "x_stride"),
                       (lambda: Load("wgt", 0, 0, 1, 1, 1, (1, 0, 0, 0)), "not padded"),
                       (lambda: Loops(3, 3), "uop_end"),
                       (lambda: Alu("div", Loops(0, 1)), "op: one of"),
                       (lambda: Alu("add", Loops(0, 1), imm=1 << 15), "imm"),
                       (lambda: Uop(2048, 0, 0), "uop.dst"),
                       (lambda: Deps(pop_prev=1), "deps.pop_prev"),
                       (lambda: from_json({"op": "jump"}), "'op' one of"),
                       (lambda: from_json({"op": "finish", "when": 1}), "finish")):
        with pytest.raises(IsaError, match=match):
            bad()


def test_configurations_and_presets() -> None:
    assert (CONFIG.inp_depth, CONFIG.wgt_depth, CONFIG.acc_depth, CONFIG.uop_depth) == (
        2048, 1024, 2048, 8192)
    fast = VtaConfig.from_json('{"preset": "ultra96", "block_out": 32}')
    assert fast.clock_mhz == 333.0 and fast.bus_bytes == 16 and fast.macs_per_cycle == 512
    assert VtaConfig.for_target("vta -config=1x16x16") == CONFIG
    for doc, match in (({"batch": 3}, "power of two"), ({"preset": "zcu"}, "unknown preset"),
                       ({"acc_bytes": 1 << 20}, "cannot address"),
                       ({"clockmhz": 1}, "unexpected field")):
        with pytest.raises(VtaConfigError, match=match):
            VtaConfig.from_json(doc)
