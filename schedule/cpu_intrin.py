"""The CPU's tensor intrinsic: an 8-bit dot product into 16 int32 lanes (x86 VNNI).

``DOT_U8I8`` (``x86_dot_u8i8_16x4``) computes ``out[i] += sum_k a[k] * b[i, k]`` for 16
outputs and 4 reduction steps, ``a`` uint8 and ``b`` int8: one AVX-512 VNNI ``vpdpbusd``
(a 4-byte input word broadcast against 64 consecutive kernel bytes). The search tensorizes
int8 convolutions in the blocked layouts made for it (``conv2d_nchw4c_int8``).

Code generation (``lower_dot_products``, run by the C generator on the flattened loop IR)
turns each nest tensorized with it into one vector statement: the 16 accumulators are read
as a vector, updated by a ``DOT_CALL`` of the input word and the kernel block, and written
back, so the accumulator hoisting and register promotion that keep a float tile in
registers keep this one there too; the nest that zeroes the accumulators becomes one vector
store. The C generator prints the call as ``vpdpbusd`` where the CPU has VNNI (checked when
the kernel is called) and as plain C everywhere else.
"""

from __future__ import annotations

from . import te
from .arith import simplify
from .expr import Binary, Call, Cast, Const, Expr, Load, Var, substitute, walk
from .intrin import TensorIntrin, decl_tensor_intrin
from .loop_ir import For, Stmt, StmtMutator, Store, VStore, walk_stmts
from .schedule import ScheduleError
from .vectorize import Broadcast, VLoad

LANES, WORD = 16, 4

#: The name of the vector call a tensorized nest becomes: (int32x16 acc, uint8x4 word,
#: int8x64 block) -> int32x16.
DOT_CALL = "dot_u8i8"


def _declare() -> TensorIntrin:
    a = te.placeholder((WORD,), "uint8", name="a")
    b = te.placeholder((LANES, WORD), "int8", name="b")
    k = te.reduce_axis((0, WORD), name="k")
    out = te.compute((LANES,), lambda i: te.sum(
        Cast("int32", a[k]) * Cast("int32", b[i, k]), axis=k), name="out")
    return decl_tensor_intrin(out, "x86_dot_u8i8_16x4", targets=("cpu",))


DOT_U8I8 = _declare()


def lower_dot_products(s: Stmt) -> Stmt:
    """``s`` (flattened) with every nest tensorized by ``DOT_U8I8`` as vector statements;
    a nest of another intrinsic is left for the caller to refuse."""
    return _Lower().visit(s)


class _Lower(StmtMutator):
    def visit_for(self, s: For) -> Stmt:
        if s.kind == For.TENSORIZED and s.intrin == DOT_U8I8.name:
            return _vector_statement(s)
        return super().visit_for(s)


def _fail(loop: For, why: str) -> ScheduleError:
    return ScheduleError(f"loop {loop.var.name} is tensorized with {DOT_U8I8.name}, but "
                         f"{why}")


def _vector_statement(loop: For) -> Stmt:
    stores = [st for st in walk_stmts(loop) if isinstance(st, Store | VStore)]
    inner = [st for st in walk_stmts(loop.body) if isinstance(st, For)]
    if len(stores) != 1 or not isinstance(stores[0], Store) or len(inner) > 1:
        raise _fail(loop, "its body is not one accumulation")
    if _extent(loop) != LANES or (inner and _extent(inner[0]) != WORD):
        raise _fail(loop, "its loops are not 16 outputs by 4 reduction steps (in that order)")
    (store,) = stores
    lane = loop.var
    step = inner[0].var if inner else Var("unused")
    acc = store.buffer
    base = _base(loop, store.indices[0], lane, step, lane_stride=1, step_stride=0)
    if isinstance(store.value, Const):  # the nest that resets the accumulators
        return VStore(acc, base, Broadcast(store.value, LANES), LANES)
    if not inner:
        raise _fail(loop, "it has no reduction loop")
    word, block = _operands(loop, store)
    a_base = _base(loop, word.indices[0], lane, step, lane_stride=0, step_stride=1)
    b_base = _base(loop, block.indices[0], lane, step, lane_stride=WORD, step_stride=1)
    dot = Call(DOT_CALL, (VLoad(acc, base, LANES), VLoad(word.source, a_base, WORD),
                          VLoad(block.source, b_base, LANES * WORD)), f"int32x{LANES}")
    return VStore(acc, base, dot, LANES)


def _extent(loop: For) -> int:
    return int(loop.extent.value) if isinstance(loop.extent, Const) else -1


def _operands(loop: For, store: Store) -> tuple[Load, Load]:
    """The uint8 input load and the int8 kernel load of ``acc + a * b``."""
    value = store.value
    if not (isinstance(value, Binary) and value.op == "+"):
        raise _fail(loop, "its body does not accumulate a sum")
    product = value.b if isinstance(value.a, Load) and value.a.source is store.buffer \
        else value.a
    loads = [n for n in walk(product) if isinstance(n, Load)]
    casts = [n for n in walk(product) if isinstance(n, Cast)]
    if not (isinstance(product, Binary) and product.op == "*" and len(loads) == 2
            and len(casts) == 2):
        raise _fail(loop, "its body is not a product of two widened loads")
    by_type = {ld.dtype: ld for ld in loads}
    if set(by_type) != {"uint8", "int8"}:
        raise _fail(loop, f"it multiplies {loads[0].dtype} by {loads[1].dtype}, not uint8 "
                          "by int8")
    return by_type["uint8"], by_type["int8"]


def _base(loop: For, index: Expr, lane: Var, step: Var, lane_stride: int,
          step_stride: int) -> Expr:
    """``index`` at lane 0 and step 0, after checking that it advances by ``lane_stride``
    per lane and ``step_stride`` per step (the contiguous blocks the instruction reads)."""
    zero = Const(0, "int32")
    base = simplify(substitute(index, {lane: zero, step: zero}))
    for var, stride in ((lane, lane_stride), (step, step_stride)):
        moved = simplify(substitute(index, {lane: zero, step: zero, var: Const(1, "int32")}))
        delta = simplify(moved - base)
        if not (isinstance(delta, Const) and delta.value == stride):
            raise _fail(loop, f"its access {index} does not advance by {stride} per "
                              f"{var.name} (the blocked layout the instruction reads)")
    return base


__all__ = ["DOT_CALL", "DOT_U8I8", "lower_dot_products"]
