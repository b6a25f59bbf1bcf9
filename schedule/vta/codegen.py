"""Code generation for ``vta``: a lowered schedule of a packed computation
(``schedule.vta.compute``) becomes the accelerator's instruction stream, its micro-op
kernels and the DRAM layout of its arguments — a :class:`~schedule.vta.program.VtaProgram`.

The loops outside the on-chip work run on the host at compile time: they are unrolled into
the stream. Inside them, each innermost nest becomes instructions by what it stores:

- a copy from a memory tensor into an ``inp`` / ``wgt`` buffer: LOADs (2-D strided DMA of
  whole entries; loops that do not fit one DMA repeat it);
- a store into the ``acc`` buffer through the GEMM intrinsic's loops (``tensorize``): a GEMM
  whose two largest outer loops are the instruction's loops and whose others are unrolled
  into micro-ops; a constant store there (the reduction's init) is a resetting GEMM;
- a copy from a memory tensor into an ``acc`` buffer (a layer's bias): LOADs of accumulator
  entries (compute module);
- a store into a memory tensor of an expression of the accumulator (shift right, max, min,
  add, mul by constants; add of such a copied accumulator tile), then a cast to int8: ALU
  instructions in place, then a STORE.

Buffers are placed in their on-chip memories as the loop nest allocates them (a buffer
over capacity is an invalid schedule, with a message naming it). A loop bound to
``vthread`` runs its iterations as interleaved lanes, each with its own buffers, so that
one lane's loads can overlap the other's compute (a reduction step's loads and GEMM are
emitted for one lane, then the next). The dependency tokens come last, from the
buffers each instruction reads and writes: an instruction waits (pops) for the latest
instruction of a neighbouring module it conflicts with, which pushes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from ..expr import Binary, Cast, Compare, Const, Expr, Load, Logic, Select, Var, free_vars
from ..loop_ir import (
    Allocate,
    Buffer,
    For,
    IfThenElse,
    LoweredFunc,
    Prefetch,
    Seq,
    Stmt,
    Store,
    walk_stmts,
)
from ..lower import lower
from ..schedule import ScheduleError
from ..steps import Steps
from ..workload import Workload
from .compute import VtaCompute
from .config import VtaConfig
from .isa import Alu, Deps, Finish, Gemm, Instruction, IsaError, Loops, Module, Uop
from .isa import Load as LoadInsn
from .isa import Store as StoreInsn
from .program import DramArg, VtaProgram

_SCOPE_MEM = {"inp": "inp", "wgt": "wgt", "acc": "acc"}
_ORDER = (Module.LOAD, Module.COMPUTE, Module.STORE)
#: The most instructions a generated program may have.
MAX_PROGRAM = 200_000


class VtaCodegenError(ScheduleError):
    """A schedule the accelerator cannot run; the message says which part and why."""


# ---------------------------------------------------------------------------- helpers


def _eval(e: Expr, env: dict[Var, int]) -> int:
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Cast):
        return _eval(e.value, env)
    if isinstance(e, Logic):
        a = _eval(e.a, env)
        return int(bool(a) and bool(_eval(e.b, env))) if e.op == "and" else \
            int(bool(a) or bool(_eval(e.b, env)))
    if isinstance(e, Compare):
        a, b = _eval(e.a, env), _eval(e.b, env)
        return int({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                    "!=": a != b}[e.op])
    if isinstance(e, Binary):
        a, b = _eval(e.a, env), _eval(e.b, env)
        ops = {"+": a + b, "-": a - b, "*": a * b, "min": min(a, b), "max": max(a, b)}
        if e.op in ops:
            return ops[e.op]
        if e.op == "floordiv":
            return a // b
        if e.op == "floormod":
            return a % b
    raise VtaCodegenError(f"vta: index expression {e} is not integer arithmetic")


@dataclass
class _Loop:
    var: Var
    extent: int


def _peel(s: Stmt) -> tuple[list[_Loop], list[bool], Store]:
    """A perfect nest's loops (outer first), which are tensorized, and its store."""
    loops: list[_Loop] = []
    tensorized: list[bool] = []
    while isinstance(s, For):
        if not isinstance(s.extent, Const):
            raise VtaCodegenError(f"vta: loop {s.var.name} has no constant extent")
        loops.append(_Loop(s.var, int(s.extent.value)))
        tensorized.append(s.kind == For.TENSORIZED)
        s = s.body
    if isinstance(s, IfThenElse):
        raise VtaCodegenError("vta: a guarded (partial) tile cannot run on the accelerator; "
                              "choose tiles that divide the tensor")
    if not isinstance(s, Store):
        raise VtaCodegenError("vta: an innermost loop nest must end in one store")
    return loops, tensorized, s


@dataclass
class _Affine:
    """An entry address as ``base + sum(coef[v] * v)`` over a nest's loop variables."""

    base: int
    coef: dict[Var, int]


@dataclass
class _Lane:
    """One virtual thread: its host loop values and where its buffers are."""

    env: dict[Var, int]
    bases: dict[Buffer, int]

    def fork(self, var: Var, value: int) -> _Lane:
        return _Lane({**self.env, var: value}, dict(self.bases))


@dataclass
class _Item:
    insn: Instruction
    module: Module
    reads: list[tuple[str, int, int]] = field(default_factory=list)  # (mem, first, end)
    writes: list[tuple[str, int, int]] = field(default_factory=list)


# ---------------------------------------------------------------------------- codegen


class _Codegen:
    def __init__(self, func: LoweredFunc, config: VtaConfig):
        self.c = config
        self.func = func
        self.hold = False  # keep inner buffers placed (lanes emitted one by one)
        #: resets of a lane's accumulator deferred to just before its next GEMM
        self.resets: dict[tuple[Buffer, int], tuple[list[_Loop], Store, _Lane]] = {}
        self.items: list[_Item] = []
        self.uops: list[Uop] = []
        self._kernels: dict[tuple[Uop, ...], int] = {}
        self._coefs: dict[tuple[int, ...], dict[Var, int]] = {}
        self.top = {"inp": 0, "wgt": 0, "acc": 0}
        self.peak = dict(self.top)
        self.args = self._place_args()

    # ------------------------------------------------------------------ layout
    def entry_shape(self, mem: str) -> tuple[int, int]:
        c = self.c
        return {"inp": (c.batch, c.block_in), "wgt": (c.block_out, c.block_in),
                "acc": (c.batch, c.block_out), "out": (c.batch, c.block_out)}[mem]

    def depth(self, mem: str) -> int:
        return {"inp": self.c.inp_depth, "wgt": self.c.wgt_depth, "acc": self.c.acc_depth}[mem]

    def _place_args(self) -> dict[Buffer, DramArg]:
        """Memory arguments in DRAM order, each classed by the buffer it moves to or from
        (found from the copies that read it, or the stores that write it)."""
        mems: dict[Buffer, str] = {}
        self.acc_copies = {s.buffer for s in walk_stmts(self.func.body)
                           if isinstance(s, Store) and _is_acc_copy(s)}
        for s in walk_stmts(self.func.body):
            if isinstance(s, Store):
                if s.buffer.scope == "global":
                    mems[s.buffer] = "out"
                elif s.buffer.scope in ("inp", "wgt") or s.buffer in self.acc_copies:
                    source, _ = _copy_source(s.value)
                    if isinstance(source.source, Buffer) and source.source.scope == "global":
                        mems[source.source] = s.buffer.scope
        args: dict[Buffer, DramArg] = {}
        offset = 0
        for buf in self.func.args:
            mem = mems.get(buf)
            if mem is None or mem == "?":
                raise VtaCodegenError(f"vta: argument {buf.name} is neither copied into an "
                                      "inp / wgt buffer nor stored from the accumulator")
            self._check_entries(buf, mem)
            size = self.c.entry_bytes(mem)
            offset += -offset % size
            args[buf] = DramArg(buf.name, mem, list(buf.shape), buf.dtype, offset // size)
            offset += buf.nbytes
        self.dram_end = offset
        return args

    def _check_entries(self, buf: Buffer, mem: str) -> None:
        want = self.entry_shape(mem)
        dtype = "int32" if mem == "acc" else "int8"
        if len(buf.shape) < 3 or tuple(buf.shape[-2:]) != want or buf.dtype != dtype or \
                buf.strides[-2] != want[1] or buf.strides[-3] % (want[0] * want[1]):
            raise VtaCodegenError(f"vta: {buf.name} ({buf.dtype}{list(buf.shape)}) is not laid "
                                  f"out in whole {mem} entries of {dtype}{list(want)}")

    # ------------------------------------------------------------------ addresses
    def affine(self, buf: Buffer, indices: tuple[Expr, ...], lane: _Lane,
               loops: list[_Loop]) -> _Affine:
        """The entry address of ``buf[indices]`` (its entry dimensions ignored) over
        ``loops``; an error if it is not affine in them. The loops' coefficients do not
        depend on the host loops' values: they are found (and checked) once per nest."""
        per_entry = buf.shape[-1] * buf.shape[-2]
        outer = list(zip(indices[:-2], buf.strides[:-2], strict=True))

        def at(point: dict[Var, int]) -> int:
            env = {**lane.env, **point}
            return sum(_eval(i, env) * stride for i, stride in outer) // per_entry

        zero = {lp.var: 0 for lp in loops}
        base = at(zero)
        key = (id(buf), id(indices), tuple(id(lp.var) for lp in loops))
        coef = self._coefs.get(key)
        if coef is None:
            coef = {lp.var: at({**zero, lp.var: 1}) - base for lp in loops}
            last = {lp.var: lp.extent - 1 for lp in loops}
            if at(last) != base + sum(coef[v] * x for v, x in last.items()):
                raise VtaCodegenError(f"vta: {buf.name}'s addresses are not affine in the "
                                      "loops")
            self._coefs[key] = coef
        return _Affine(base, dict(coef))

    def region(self, buf: Buffer, lane: _Lane) -> tuple[str, int, int]:
        per_entry = buf.shape[-1] * buf.shape[-2]
        base = lane.bases[buf]
        return (buf.scope, base, base + buf.size // per_entry)

    def add(self, insn: Instruction, reads: list[tuple[str, int, int]] | None = None,
            writes: list[tuple[str, int, int]] | None = None) -> None:
        """Append an instruction with the buffer regions it reads and writes; a program
        past ``MAX_PROGRAM`` instructions is refused (small tiles of a big layer would
        take minutes and gigabytes to generate and simulate)."""
        if len(self.items) >= MAX_PROGRAM:
            raise VtaCodegenError(f"vta: the program would exceed {MAX_PROGRAM:,} "
                                  "instructions; choose larger tiles")
        self.items.append(_Item(insn, insn.module, reads or [], writes or []))

    # ------------------------------------------------------------------ walk
    def walk(self, s: Stmt, lanes: list[_Lane]) -> None:
        if isinstance(s, Seq):
            for child in s.stmts:
                self.walk(child, lanes)
        elif isinstance(s, Allocate):
            self.allocate(s, lanes)
        elif isinstance(s, IfThenElse):
            raise VtaCodegenError("vta: a guarded (partial) tile cannot run on the "
                                  "accelerator; choose tiles that divide the tensor")
        elif isinstance(s, For) and s.kind == "vthread":
            extent = _eval(s.extent, {})
            self.walk(s.body, [lane.fork(s.var, v) for lane in lanes for v in range(extent)])
        elif isinstance(s, For) and self._is_host_loop(s):
            for i in range(_eval(s.extent, {})):
                self.walk(s.body, [lane.fork(s.var, i) for lane in lanes])
        else:
            self.nest(s, lanes)

    @staticmethod
    def _is_host_loop(s: For) -> bool:
        inner = list(walk_stmts(s.body))
        return sum(isinstance(x, Store) for x in inner) > 1 or \
            any(isinstance(x, Allocate) for x in inner)

    def allocate(self, s: Allocate, lanes: list[_Lane]) -> None:
        buf = s.buffer
        mem = _SCOPE_MEM.get(buf.scope)
        if mem is None:
            raise VtaCodegenError(f"vta: {buf.name} is kept in {buf.scope!r}; the accelerator "
                                  "has inp, wgt and acc buffers (set_scope / cache_read)")
        self._check_entries(buf, mem)
        entries = buf.size // (buf.shape[-1] * buf.shape[-2])
        saved = self.top[mem]
        for lane in lanes:
            lane.bases[buf] = self.top[mem]
            self.top[mem] += entries
        if self.top[mem] > self.depth(mem):
            raise VtaCodegenError(
                f"vta: the {mem} buffer holds {self.depth(mem)} entries "
                f"({self.depth(mem) * self.c.entry_bytes(mem) // 1024} KiB); this schedule "
                f"needs {self.top[mem]} at once ({buf.name}: {entries} x {len(lanes)} "
                "virtual thread(s)); choose smaller tiles")
        self.peak[mem] = max(self.peak[mem], self.top[mem])
        if len(lanes) > 1 and self._lane_by_lane(s.body):
            tops, held, self.hold = dict(self.top), self.hold, True
            for lane in lanes:
                self.walk(s.body, [lane])
            self.top, self.hold = tops, held
        else:
            self.walk(s.body, lanes)
        if not self.hold:
            self.top[mem] = saved

    def _lane_by_lane(self, s: Stmt) -> bool:
        """Whether ``s`` is one step of a reduction, loads and the GEMM that uses them
        (no host loop): emitted one lane after the other. The load module runs in program
        order, so with the lanes interleaved statement by statement, a lane's input load,
        waiting for the other lane's GEMM to free that lane's buffer, would hold up this
        lane's weight load behind it, and so this lane's next GEMM. Buffers allocated
        inside stay placed until all lanes are done (``hold``)."""
        stmts = list(walk_stmts(s))
        if any(isinstance(x, For) and (x.kind == "vthread" or self._is_host_loop(x))
               for x in stmts):
            return False
        scopes = {x.buffer.scope for x in stmts if isinstance(x, Store)}
        return "acc" in scopes and bool(scopes & {"inp", "wgt"})

    def nest(self, s: Stmt, lanes: list[_Lane]) -> None:
        loops, tensorized, store = _peel(s)
        scope = store.buffer.scope
        if scope in ("inp", "wgt") or store.buffer in self.acc_copies:
            for lane in lanes:
                self.load(loops, store, lane)
        elif scope == "acc":
            if not any(tensorized):
                raise VtaCodegenError(f"vta: {store.buffer.name} is computed in the "
                                      "accumulator without the GEMM intrinsic (tensorize its "
                                      "innermost block)")
            first = tensorized.index(True)
            for n, lane in enumerate(lanes):
                if n and isinstance(store.value, Const):
                    # a later lane's reset waits for that lane's last store: it is emitted
                    # just before the lane's next GEMM, so the first lane's can run first
                    self.resets[(store.buffer, lane.bases[store.buffer])] = (
                        loops[:first], store, lane)
                else:
                    self.gemm(loops[:first], store, lane)
        elif scope == "global":
            for lane in lanes:
                self.alu_store(loops, store, lane)
        else:
            raise VtaCodegenError(f"vta: cannot compute {store.buffer.name} in {scope!r}")

    # ------------------------------------------------------------------ DMA
    def _entry_loops(self, dst: tuple[Expr, ...], src: tuple[Expr, ...], loops: list[_Loop],
                     what: str) -> list[_Loop]:
        """The loops outside the entry: the innermost two indices of both sides must be the
        same whole-entry loops (or 0 for a dimension of one)."""
        inner: set[Var] = set()
        for a, b in zip(dst[-2:], src[-2:], strict=True):
            if a.key() != b.key():
                raise VtaCodegenError(f"vta: {what} does not move whole entries")
            if isinstance(a, Var):
                inner.add(a)
            elif not (isinstance(a, Const) and a.value == 0):
                raise VtaCodegenError(f"vta: {what} does not move whole entries")
        return [lp for lp in loops if lp.var not in inner]

    def _dma(self, loops: list[_Loop], sram: _Affine, dram: _Affine
             ) -> Iterator[tuple[int, int, int, int, int]]:
        """(sram, dram, y, x, stride) of each DMA covering ``loops``, innermost dimensions
        first into x (contiguous on both sides) and y (rows x apart on chip)."""
        rest = [lp for lp in loops if lp.extent > 1]
        x = y = 1
        stride = 1
        if rest and sram.coef[rest[-1].var] == 1 and dram.coef[rest[-1].var] == 1:
            x = rest.pop().extent
            stride = x
        if rest and sram.coef[rest[-1].var] == x and dram.coef[rest[-1].var] >= x:
            lp = rest.pop()
            y, stride = lp.extent, dram.coef[lp.var]
        for point in itertools.product(*(range(lp.extent) for lp in rest)):
            s_off = sum(sram.coef[lp.var] * i for lp, i in zip(rest, point, strict=True))
            d_off = sum(dram.coef[lp.var] * i for lp, i in zip(rest, point, strict=True))
            yield sram.base + s_off, dram.base + d_off, y, x, stride

    def load(self, loops: list[_Loop], store: Store, lane: _Lane) -> None:
        source, inside = _copy_source(store.value)
        if source.source not in self.args:
            raise VtaCodegenError(f"vta: {store.buffer.name} must be copied from a memory "
                                  "tensor (an argument)")
        what = f"the copy into {store.buffer.name}"
        outer = self._entry_loops(store.indices, source.indices, loops, what)
        sram = self.affine(store.buffer, store.indices, lane, outer)
        dram = self.affine(source.source, source.indices, lane, outer)
        arg = self.args[source.source]
        mem = store.buffer.scope
        base = lane.bases[store.buffer]
        if inside is not None:
            self._padded_load(outer, inside, sram, dram, mem, base + sram.base,
                              arg.base + dram.base, lane)
            return
        for s_addr, d_addr, y, x, stride in self._dma(outer, sram, dram):
            first = base + s_addr
            insn = LoadInsn(mem, first, arg.base + d_addr, y, x, stride)
            self.add(insn, writes=[(mem, first, first + y * x)])

    def _padded_load(self, loops: list[_Loop], inside: Expr, sram: _Affine, dram: _Affine,
                     mem: str, sram_base: int, dram_base: int, lane: _Lane) -> None:
        """A copy that reads zeros outside the tensor (a convolution's padding): the DMA's
        2-D tile is its two innermost loops (rows of columns, dense on chip), its padding
        the rows and columns where ``inside`` is false; other loops repeat the DMA."""
        live = [lp for lp in loops if lp.extent > 1]
        x = live[-1] if live and sram.coef[live[-1].var] == 1 and \
            dram.coef[live[-1].var] == 1 else None
        y = live[-2] if x is not None and len(live) > 1 and \
            sram.coef[live[-2].var] == x.extent else None
        tile = [lp for lp in (y, x) if lp is not None]
        ranges = {lp.var: (0, lp.extent) for lp in tile}
        grouped = _conditions_by_var(inside, {lp.var for lp in loops})
        if not all(_eval(c, lane.env) for c in grouped.pop(None, [])):
            raise VtaCodegenError("vta: a tile lies entirely in the padding")
        for var, checks in grouped.items():
            lp = next((t for t in tile if t.var is var), None)
            if lp is None:
                raise VtaCodegenError("vta: the DMA pads only the rows and columns of its "
                                      f"2-D tile, not along {var.name}")
            valid = [all(_eval(c, {**lane.env, var: i}) for c in checks)
                     for i in range(lp.extent)]
            first = valid.index(True) if any(valid) else 0
            end = len(valid) - valid[::-1].index(True) if any(valid) else 0
            if end <= first or not all(valid[first:end]):
                raise VtaCodegenError(f"vta: the copy's valid {var.name} range is not one "
                                      "block (or is empty)")
            ranges[var] = (first, end)
        (y0, y1), (x0, x1) = (ranges[y.var] if y else (0, 1)), (ranges[x.var] if x else (0, 1))
        rows, cols = (y.extent if y else 1), (x.extent if x else 1)
        stride = dram.coef[y.var] if y else max(x1 - x0, 1)
        start = dram_base + (y0 * dram.coef[y.var] if y else 0) + (x0 if x else 0)
        rest = [lp for lp in live if lp not in tile]
        for point in itertools.product(*(range(lp.extent) for lp in rest)):
            s_off = sum(sram.coef[lp.var] * i for lp, i in zip(rest, point, strict=True))
            d_off = sum(dram.coef[lp.var] * i for lp, i in zip(rest, point, strict=True))
            first = sram_base + s_off
            insn = LoadInsn(mem, first, start + d_off, y1 - y0, x1 - x0, stride,
                            (y0, rows - y1, x0, cols - x1))
            self.add(insn, writes=[(mem, first, first + rows * cols)])

    # ------------------------------------------------------------------ compute
    def _kernel(self, uops: list[Uop]) -> int:
        key = tuple(uops)
        if key not in self._kernels:
            self._kernels[key] = len(self.uops)
            self.uops.extend(uops)
        return self._kernels[key]

    def _loops(self, loops: list[_Loop], dst: _Affine, src: _Affine | None,
               wgt: _Affine | None) -> Loops:
        """The instruction's two loop levels (the nest's largest loops) and its micro-ops
        (the other loops, unrolled)."""
        live = [lp for lp in loops if lp.extent > 1]
        levels = sorted(sorted(live, key=lambda lp: -lp.extent)[:2], key=live.index)
        unrolled = [lp for lp in live if lp not in levels]
        none = _Affine(0, {})

        def offset(a: _Affine | None, point: tuple[int, ...]) -> int:
            a = a or none
            return a.base + sum(a.coef.get(lp.var, 0) * i
                                for lp, i in zip(unrolled, point, strict=True))

        uops = [Uop(offset(dst, p), offset(src, p), offset(wgt, p))
                for p in itertools.product(*(range(lp.extent) for lp in unrolled))]
        first = self._kernel(uops)
        levels = [_Loop(Var("_"), 1)] * (2 - len(levels)) + levels

        def factor(a: _Affine | None, lp: _Loop) -> int:
            return 0 if a is None else a.coef.get(lp.var, 0)

        (lo, li) = levels
        return Loops(first, first + len(uops), lo.extent, li.extent,
                     factor(dst, lo), factor(dst, li), factor(src, lo), factor(src, li),
                     factor(wgt, lo), factor(wgt, li))

    def _operands(self, value: Expr) -> tuple[Load, Load]:
        loads = [n for n in _loads(value) if n.source.scope in ("inp", "wgt")]
        by_scope = {n.source.scope: n for n in loads}
        if len(loads) != 2 or set(by_scope) != {"inp", "wgt"}:
            raise VtaCodegenError("vta: the GEMM must read one inp and one wgt buffer")
        return by_scope["inp"], by_scope["wgt"]

    def gemm(self, loops: list[_Loop], store: Store, lane: _Lane) -> None:
        acc = store.buffer
        reset = self.resets.pop((acc, lane.bases[acc]), None)
        if reset is not None:
            self.gemm(*reset)
        dst = self.affine(acc, store.indices, lane, loops)
        dst.base += lane.bases[acc]
        acc_region = self.region(acc, lane)
        if isinstance(store.value, Const):
            if store.value.value != 0:
                raise VtaCodegenError("vta: the accumulator can only be reset to 0")
            insn = Gemm(self._loops(loops, dst, None, None), reset=True)
            self.add(insn, writes=[acc_region])
            return
        inp, wgt = self._operands(store.value)
        src = self.affine(inp.source, inp.indices, lane, loops)
        src.base += lane.bases[inp.source]
        w = self.affine(wgt.source, wgt.indices, lane, loops)
        w.base += lane.bases[wgt.source]
        insn = Gemm(self._loops(loops, dst, src, w))
        self.add(insn, reads=[self.region(inp.source, lane), self.region(wgt.source, lane),
                              acc_region], writes=[acc_region])

    def alu_store(self, loops: list[_Loop], store: Store, lane: _Lane) -> None:
        if store.buffer not in self.args or store.buffer.dtype != "int8":
            raise VtaCodegenError(f"vta: {store.buffer.name} is not an int8 output argument")
        ops, acc_load = _alu_ops(store.value, self.acc_copies)
        acc = acc_load.source
        outer = self._entry_loops(store.indices, acc_load.indices, loops,
                                  f"the store of {store.buffer.name}")
        sram = self.affine(acc, acc_load.indices, lane, outer)
        dram = self.affine(store.buffer, store.indices, lane, outer)
        _check_one_to_one(outer, sram, f"the accumulator entries read by {store.buffer.name}")
        region = self.region(acc, lane)
        base = lane.bases[acc]
        on_chip = _Affine(sram.base + base, sram.coef)
        for op, operand in ops:
            if isinstance(operand, Load):  # an accumulator tile copied from memory
                self._entry_loops(store.indices, operand.indices, loops,
                                  f"the {op} of {operand.source.name}")
                src = self.affine(operand.source, operand.indices, lane, outer)
                src.base += lane.bases[operand.source]
                insn = Alu(op, self._loops(outer, on_chip, src, None), None)
                reads = [region, self.region(operand.source, lane)]
            else:
                insn = Alu(op, self._loops(outer, on_chip, on_chip, None), operand)
                reads = [region]
            self.add(insn, reads=reads, writes=[region])
        arg = self.args[store.buffer]
        for s_addr, d_addr, y, x, stride in self._dma(outer, sram, dram):
            insn = StoreInsn(base + s_addr, arg.base + d_addr, y, x, stride)
            self.add(insn, reads=[region])

    # ------------------------------------------------------------------ driver
    def run(self) -> VtaProgram:
        self.walk(self.func.body, [_Lane({}, {})])
        if self.resets:
            raise VtaCodegenError("vta: an accumulator is reset but never accumulated into")
        if len(self.uops) > self.c.uop_depth:
            raise VtaCodegenError(f"vta: {len(self.uops)} micro-ops do not fit the micro-op "
                                  f"buffer ({self.c.uop_depth}); choose smaller inner loops")
        if not self.uops:
            raise VtaCodegenError("vta: the schedule computes nothing on the accelerator")
        uop_base = self.dram_end + (-self.dram_end % 4)
        program = [LoadInsn("uop", 0, uop_base // 4, 1, len(self.uops), len(self.uops))]
        program += _with_tokens(self.items)
        return VtaProgram(program, self.uops, list(self.args.values()),
                          uop_base // 4, uop_base + 4 * len(self.uops), dict(self.peak))


def _loads(e: Expr) -> Iterator[Load]:
    from ..expr import walk

    for node in walk(e):
        if isinstance(node, Load) and isinstance(node.source, Buffer):
            yield node


def _copy_source(value: Expr) -> tuple[Load, Expr | None]:
    """What a copy into a buffer reads, and where it reads it (None: everywhere; else the
    condition outside which it is zero)."""
    if isinstance(value, Load) and isinstance(value.source, Buffer):
        return value, None
    zero = value.false_value if isinstance(value, Select) else None
    while isinstance(zero, Cast):
        zero = zero.value
    if isinstance(value, Select) and isinstance(value.true_value, Load) and \
            isinstance(zero, Const) and zero.value == 0:
        return value.true_value, value.cond
    raise VtaCodegenError("vta: a buffer is filled by a plain copy of a memory tensor (zero "
                          "outside it at most): the DMA moves data, it does not compute")


def _conditions_by_var(cond: Expr, loop_vars: set[Var]) -> dict[Var | None, list[Expr]]:
    """The conjuncts of ``cond`` grouped by the one loop variable each mentions (None: none);
    an error if one mentions two."""
    parts: list[Expr] = []
    stack = [cond]
    while stack:
        e = stack.pop()
        if isinstance(e, Logic) and e.op == "and":
            stack += [e.a, e.b]
        else:
            parts.append(e)
    grouped: dict[Var | None, list[Expr]] = {}
    for part in parts:
        mentioned = free_vars(part) & loop_vars
        if len(mentioned) > 1:
            raise VtaCodegenError(f"vta: the padding condition {part} couples two loops")
        grouped.setdefault(next(iter(mentioned), None), []).append(part)
    return grouped


def _is_acc_copy(store: Store) -> bool:
    """Whether ``store`` fills an accumulator buffer with a plain copy of memory (a bias)."""
    value = store.value
    return store.buffer.scope == "acc" and isinstance(value, Load) and \
        isinstance(value.source, Buffer) and value.source.scope == "global"


def _acc_load(e: Expr) -> bool:
    return isinstance(e, Load) and isinstance(e.source, Buffer) and e.source.scope == "acc"


def _alu_ops(value: Expr, copies: set[Buffer]) -> tuple[list[tuple[str, int | Load]], Load]:
    """The ALU operations (in the order they apply) that turn an accumulator entry into the
    stored value: ``int8(op_n(...op_1(acc, c1)..., cn))``, each ``c`` an immediate or (for
    an add) the entry of an accumulator buffer in ``copies`` (filled from memory)."""
    if not (isinstance(value, Cast) and value.dtype == "int8"):
        raise VtaCodegenError("vta: an output is the accumulator cast to int8 (requantized)")
    ops: list[tuple[str, int | Load]] = []
    e = value.value
    while isinstance(e, Binary):
        if e.op == "+" and _acc_load(e.a) and _acc_load(e.b):
            copied, e = (e.b, e.a) if e.b.source in copies else (e.a, e.b)
            if copied.source not in copies:
                raise VtaCodegenError("vta: an output adds two accumulators; the ALU adds "
                                      "one tile copied from memory (a bias)")
            ops.append(("add", copied))
            continue
        if not isinstance(e.b, Const):
            raise VtaCodegenError(f"vta: the ALU takes immediate operands here, not {e.b}")
        c = int(e.b.value)
        if e.op in ("min", "max", "+", "*"):
            ops.append(({"+": "add", "*": "mul"}.get(e.op, e.op), c))
        elif e.op == "floordiv" and c > 0 and c & (c - 1) == 0:
            ops.append(("shr", c.bit_length() - 1))
        else:
            raise VtaCodegenError(f"vta: the ALU has no operation for {e.op} by {c}")
        e = e.a
    if not _acc_load(e):
        raise VtaCodegenError("vta: an output must be computed from the accumulator")
    return ops[::-1], e


def _check_one_to_one(loops: list[_Loop], a: _Affine, what: str) -> None:
    live = [lp for lp in loops if lp.extent > 1]
    if not live:
        return
    grids = np.meshgrid(*(np.arange(lp.extent) for lp in live), indexing="ij")
    addresses = sum(g * a.coef[lp.var] for g, lp in zip(grids, live, strict=True))
    if np.unique(addresses).size != addresses.size:
        raise VtaCodegenError(f"vta: {what} are visited more than once (in-place ALU ops)")


def _neighbour(a: Module, b: Module) -> str | None:
    """``prev`` / ``next`` when module ``b`` is ``a``'s neighbour on that side."""
    step = _ORDER.index(b) - _ORDER.index(a)
    return {-1: "prev", 1: "next"}.get(step)


def _with_tokens(items: list[_Item]) -> list[Instruction]:
    """The instructions with dependency flags: each waits for the latest earlier
    instruction of a neighbouring module that it conflicts with (reads what it writes,
    writes what it reads or writes); one pop per wait, paired in order with one push."""
    regions: dict[str, dict[tuple[int, int], tuple[int | None, list[int]]]] = {}
    waits: list[dict[Module, int]] = []
    for n, item in enumerate(items):
        latest: dict[Module, int] = {}

        def note(j: int | None, item: _Item = item, latest: dict[Module, int] = latest) -> None:
            if j is not None and items[j].module != item.module:
                latest[items[j].module] = max(latest.get(items[j].module, -1), j)

        for mem, lo, hi in item.reads + item.writes:
            for (a, b), (writer, _) in regions.get(_same(mem), {}).items():
                if a < hi and lo < b:
                    note(writer)
        for mem, lo, hi in item.writes:
            for (a, b), (_, readers) in regions.get(_same(mem), {}).items():
                if a < hi and lo < b:
                    for r in readers:
                        note(r)
        for mem, lo, hi in item.reads:
            writer, readers = regions.setdefault(_same(mem), {}).get((lo, hi), (None, []))
            regions[_same(mem)][(lo, hi)] = (writer, [*readers, n])
        for mem, lo, hi in item.writes:
            regions.setdefault(_same(mem), {})[(lo, hi)] = (n, [])
        waits.append(latest)
    stores = [n for n, it in enumerate(items) if it.module is Module.STORE]
    finish = _Item(Finish(), Module.COMPUTE)
    items = [*items, finish]
    waits.append({Module.STORE: stores[-1]} if stores else {})
    flags: list[dict[str, bool]] = [{} for _ in items]
    satisfied: dict[tuple[Module, Module], int] = {}
    for n, (item, latest) in enumerate(zip(items, waits, strict=True)):
        for module, j in latest.items():
            side = _neighbour(item.module, module)
            if side is None:
                raise VtaCodegenError(f"vta: {item.insn} depends on the {module} module, which "
                                      "is not next to its own")
            if j > satisfied.get((module, item.module), -1):
                flags[n][f"pop_{side}"] = True
                flags[j][f"push_{_neighbour(module, item.module)}"] = True
                satisfied[(module, item.module)] = j
    out: list[Instruction] = []
    for item, f in zip(items, flags, strict=True):
        try:
            out.append(replace(item.insn, deps=Deps(**f)) if f else item.insn)
        except IsaError as err:
            raise VtaCodegenError(f"vta: {err}") from None
    return out


def _same(mem: str) -> str:
    """The output buffer mirrors the accumulator: one memory for dependencies."""
    return "acc" if mem == "out" else mem


def compile_workload(workload: Workload, steps: Steps | list, config: VtaConfig
                     ) -> tuple[VtaCompute, VtaProgram]:
    """A workload's packed computation (``VtaUnsupported`` if the accelerator cannot
    compute it) and the program of ``steps`` on it (``ScheduleError`` if they do not apply
    or cannot run there)."""
    vc = VtaCompute(workload, config)
    func = lower(vc.schedule(steps), vc.tensors, name="vta_main", unroll=False)
    return vc, generate(func, config)


def generate(func: LoweredFunc, config: VtaConfig) -> VtaProgram:
    """The accelerator program of a lowered schedule (lower it with ``unroll=False``).
    Raises :class:`VtaCodegenError` (a ``ScheduleError``) for what the accelerator cannot
    run."""
    if any(isinstance(s, Prefetch) for s in walk_stmts(func.body)):
        raise VtaCodegenError("vta: prefetch is a CPU schedule primitive (the accelerator "
                              "loads its tiles by DMA)")
    try:
        return _Codegen(func, config).run()
    except IsaError as err:  # a field out of range: too large a tile or tensor
        raise VtaCodegenError(f"vta: {err}") from None
