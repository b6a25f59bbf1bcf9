"""CUDA C and OpenCL C from one GPU program (``gpu_lower``).

One printer walks the loop IR; a :class:`Dialect` says how each language spells what
differs: the kernel qualifier and parameter qualifiers, block and thread indices, shared
memory, the barrier, scalar type names and math function names. Everything else (loops,
guards, indexing, helper functions for floor division) is printed once.

Each kernel is an ``extern "C"`` (CUDA) or plain (OpenCL) function named
``<function>_kernel<i>`` taking the global buffers it touches, in the order
``Kernel.params`` lists them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import arith
from . import dtype as dt
from .codegen_c import _RESERVED, _nonnegative
from .expr import (
    Binary,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Load,
    Logic,
    Not,
    Select,
    Var,
    free_vars,
    substitute,
    transform,
)
from .gpu_lower import GpuProgram, Kernel
from .loop_ir import (
    Allocate,
    Barrier,
    For,
    Prefetch,
    Store,
    UnrolledSize,
)
from .schedule import ScheduleError
from .source_printer import SourcePrinter

_MATH = ("exp", "log", "sqrt", "tanh", "erf", "floor", "ceil", "pow")
_VECTOR_LANES = (2, 4)
_VECTOR_TYPES = ("float32", "int32")
# Names a buffer or loop may not take in either dialect (beyond C's).
_GPU_RESERVED = _RESERVED | frozenset([
    "kernel", "__kernel", "global", "local", "constant", "private", "half", "uchar", "uint",
    "ulong", "ushort", "barrier", "class", "new", "delete", "template", "this", "namespace",
    "operator", "private", "public", "protected", "virtual", "typename", "using", "min",
    "max", "signed", "blockIdx", "threadIdx", "blockDim", "gridDim", "warpSize"])


@dataclass(frozen=True)
class Dialect:
    """How one GPU language spells the parts that differ."""

    name: str
    prelude: str
    kernel: str  # the qualifiers before a kernel's return type
    param: str  # a global buffer parameter, with {type} and {name}
    shared: str  # a shared array declaration, with {type}, {name} and {size}
    barrier: str
    helper: str  # the qualifiers of a device helper function
    indices: dict[str, str]
    types: dict[str, str]
    float_suffix_math: bool  # CUDA's expf/logf; OpenCL's overloaded exp/log
    vector_copy: str  # ``lanes`` elements from {src} to {dst} (pointers), type {vtype}

    def math(self, name: str, dtype: str) -> str:
        if name == "abs":
            return "fabsf" if self.float_suffix_math else "fabs"
        return f"{name}f" if self.float_suffix_math and dtype == "float32" else name


CUDA = Dialect(
    name="cuda",
    prelude="#include <math.h>\n",
    kernel='extern "C" __global__ void',
    param="{type}* __restrict__ {name}",
    # aligned for the vector copies (16 bytes: a float4)
    shared="__shared__ __align__(16) {type} {name}[{size}];",
    barrier="__syncthreads();",
    helper="__device__ __forceinline__",
    indices={"blockIdx.x": "blockIdx.x", "blockIdx.y": "blockIdx.y", "blockIdx.z": "blockIdx.z",
             "threadIdx.x": "threadIdx.x", "threadIdx.y": "threadIdx.y",
             "threadIdx.z": "threadIdx.z"},
    types={"float32": "float", "float16": "__half", "int8": "signed char",
           "uint8": "unsigned char", "int32": "int", "int64": "long long", "bool": "bool"},
    float_suffix_math=True,
    vector_copy="*({vtype}*)({dst}) = *(const {vtype}*)({src});",
)

OPENCL = Dialect(
    name="opencl",
    prelude="",
    kernel="__kernel void",
    param="__global {type}* restrict {name}",
    shared="__local {type} {name}[{size}] __attribute__((aligned(16)));",
    # global too: a cross-thread reduction's result is folded into memory other threads
    # initialised
    barrier="barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
    helper="inline",
    indices={"blockIdx.x": "get_group_id(0)", "blockIdx.y": "get_group_id(1)",
             "blockIdx.z": "get_group_id(2)", "threadIdx.x": "get_local_id(0)",
             "threadIdx.y": "get_local_id(1)", "threadIdx.z": "get_local_id(2)"},
    types={"float32": "float", "float16": "half", "int8": "char", "uint8": "uchar",
           "int32": "int", "int64": "long", "bool": "bool"},
    float_suffix_math=False,
    vector_copy="vstore{lanes}(vload{lanes}(0, {src}), 0, {dst});",
)

DIALECTS = {"cuda": CUDA, "opencl": OPENCL}


class GpuCodegen(SourcePrinter):
    """Prints the kernels of one program in one dialect."""

    def __init__(self, program: GpuProgram, dialect: Dialect):
        super().__init__(_GPU_RESERVED)
        self.program = program
        self.d = dialect
        self.helpers: dict[str, str] = {}
        self.unroll_budget = 0  # from the enclosing auto_unroll_max_step pragma
        self.sizes = UnrolledSize()

    # ------------------------------------------------------------------ names and types
    def ctype(self, dtype: str) -> str:
        if dtype == "float16":
            raise ScheduleError("GPU code generation does not support float16 yet")
        return self.d.types[dtype]

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return self.name(e, e.name)
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Load):
            return f"{self.name(e.source, e.source.name)}[{self.expr(e.indices[0])}]"
        if isinstance(e, Compare | Logic):
            op = {"and": "&&", "or": "||"}.get(e.op, e.op)
            return f"({self.expr(e.a)} {op} {self.expr(e.b)})"
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, Select):
            return (f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : "
                    f"{self.expr(e.false_value)})")
        if isinstance(e, Cast):
            return f"(({self.ctype(e.dtype)})({self.expr(e.value)}))"
        if isinstance(e, Call):
            return self._call(e)
        raise ScheduleError(f"GPU code generation: unsupported expression {type(e).__name__}")

    def const(self, c: Const) -> str:
        if c.dtype == "bool":
            return "true" if c.value else "false"
        if dt.is_float(c.dtype):
            v = float(c.value)
            if math.isinf(v):
                return "INFINITY" if v > 0 else "(-INFINITY)"
            if math.isnan(v):
                return "NAN"
            text = repr(v)
            return (text if "e" in text or "." in text else f"{text}.0") + "f"
        if c.dtype == "int64":
            return f"(({self.ctype('int64')}){c.value})"
        if c.dtype in ("int8", "uint8"):
            return f"(({self.ctype(c.dtype)}){c.value})"
        return str(c.value) if c.value >= -(2**31) + 1 else f"({c.value})"

    def _binary(self, e: Binary) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in ("+", "-", "*", "/"):
            return f"({a} {e.op} {b})"
        if e.op in ("min", "max"):  # as the C generator has them (NaN handling included)
            body = f"x {'<' if e.op == 'min' else '>'} y ? x : y"
            return f"{self._helper(e.op, e.dtype, body)}({a}, {b})"
        if e.op in ("floordiv", "floormod"):
            if isinstance(e.b, Const) and e.b.value > 0 and _nonnegative(e.a):
                return f"({a} {'/' if e.op == 'floordiv' else '%'} {b})"
            body = ("(x / y) - ((x % y != 0) && ((x < 0) != (y < 0)))" if e.op == "floordiv"
                    else "((x % y) + y) % y")
            return f"{self._helper(e.op, e.dtype, body)}({a}, {b})"
        raise ScheduleError(f"GPU code generation: unsupported operator {e.op}")

    def _helper(self, op: str, dtype: str, body: str) -> str:
        ct = self.ctype(dtype)
        name = f"tt_{op}_{dtype}"
        self.helpers.setdefault(name, f"{self.d.helper} {ct} {name}({ct} x, {ct} y) "
                                      f"{{ return {body}; }}")
        return name

    def _call(self, e: Call) -> str:
        if e.name == "shfl_down":
            return self._shuffle_down(e)
        args = [self.expr(a) for a in e.args]
        if e.dtype != "float32" and not (e.name == "abs" and dt.is_int(e.dtype)):
            raise ScheduleError(f"GPU code generation: {e.name} of {e.dtype} is not supported")
        if e.name == "abs" and dt.is_int(e.dtype):
            return f"(({args[0]}) < 0 ? -({args[0]}) : ({args[0]}))"
        if e.name == "sigmoid":
            return f"(1.0f / (1.0f + {self.d.math('exp', e.dtype)}(-({args[0]}))))"
        if e.name == "rsqrt":
            return f"rsqrt{'f' if self.d.float_suffix_math else ''}({args[0]})"
        if e.name in _MATH or e.name == "abs":
            return f"{self.d.math(e.name, e.dtype)}({', '.join(args)})"
        raise ScheduleError(f"GPU code generation: unsupported function {e.name}")

    def _shuffle_down(self, e: Call) -> str:
        """``shfl_down(value, offset, width, fence)``: ``value`` of the lane ``offset``
        above in the same group of ``width`` lanes (CUDA's ``__shfl_down_sync``),
        synchronising that group only: its mask is the group's lanes, from the thread's
        linear index; ``fence``: a ``__syncwarp`` of the group first (memory ordering)."""
        if self.d is not CUDA or e.dtype not in ("float32", "int32", "int64"):
            raise ScheduleError(f"GPU code generation: no warp shuffle of {e.dtype} in "
                                f"{self.d.name}")
        value, offset, width, fence = e.args
        w = int(width.value)
        ct = self.ctype(e.dtype)
        name = f"tt_shfl_down_{e.dtype}_w{w}{'_fenced' if fence.value else ''}"
        self.helpers.setdefault(name, "\n".join([
            f"{self.d.helper} {ct} {name}({ct} x, int offset) {{",
            "  const unsigned lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y"
            " * threadIdx.z)) & 31u;",
            f"  const unsigned group = (0xffffffffu >> {32 - w}) << (lane & ~{w - 1}u);",
            *(["  __syncwarp(group);"] if fence.value else []),
            f"  return __shfl_down_sync(group, x, offset, {w});",
            "}"]))
        return f"{name}({self.expr(value)}, {self.expr(offset)})"

    # ------------------------------------------------------------------ statements
    def visit_store(self, s: Store) -> None:
        self.emit(f"{self.name(s.buffer, s.buffer.name)}[{self.expr(s.indices[0])}] = "
                  f"{self.expr(s.value)};")

    def visit_for(self, s: For) -> None:
        if s.kind not in (For.SERIAL, For.UNROLLED, For.VECTORIZED):
            raise ScheduleError(f"loop {s.var.name} ({s.kind}) has no GPU code generation")
        if s.kind == For.VECTORIZED and self._vector_copy(s):
            return
        var = self.name(s.var, s.var.name)
        budget = self.unroll_budget
        self.unroll_budget = s.pragmas.get("auto_unroll_max_step", budget)
        # auto-unroll as the CPU lowering does it: the loops under the pragma whose whole
        # nest, unrolled, stays within the budget
        size = self.sizes.visit(s) if self.unroll_budget else None
        if s.kind == For.UNROLLED or (size is not None and size <= self.unroll_budget):
            self.emit("#pragma unroll")
        self.emit(f"for (int {var} = 0; {var} < {self.expr(s.extent)}; ++{var}) {{")
        self.nested(s.body)
        self.emit("}")
        self.unroll_budget = budget

    def _vector_copy(self, s: For) -> bool:
        """A vectorized loop of 2 or 4 that copies contiguous elements to contiguous
        elements (a cooperative fetch into shared memory), both starting at a multiple of
        its width: one vector load and store (``float4``). False where that is not proven:
        the loop stays a loop."""
        lanes = int(s.extent.value) if isinstance(s.extent, Const) else 0
        store = s.body
        if lanes not in _VECTOR_LANES or not isinstance(store, Store) \
                or not isinstance(store.value, Load) or store.buffer.dtype not in _VECTOR_TYPES:
            return False
        load = store.value
        if "local" in (store.buffer.scope, load.source.scope):  # per-thread arrays: unaligned
            return False
        bases = []
        for index in (store.indices[0], load.indices[0]):
            index = _lanes_outside_divisions(index, s.var, lanes)
            base = arith.simplify(substitute(index, {s.var: Const(0, s.var.dtype)}))
            step = arith.simplify(index - base)
            aligned = arith.simplify(Binary("floormod", base, Const(lanes, base.dtype),
                                            base.dtype))
            if step.key() != s.var.key() or not (isinstance(aligned, Const)
                                                  and aligned.value == 0):
                return False
            bases.append(base)
        vtype = f"{self.ctype(store.buffer.dtype)}{lanes}"
        dst = f"{self.name(store.buffer, store.buffer.name)} + {self.expr(bases[0])}"
        src = f"{self.name(load.source, load.source.name)} + {self.expr(bases[1])}"
        self.emit(self.d.vector_copy.format(vtype=vtype, lanes=lanes, dst=dst, src=src))
        return True

    def visit_allocate(self, s: Allocate) -> None:
        buf = s.buffer
        self.emit("{")
        self.emit(f"  {self.ctype(buf.dtype)} {self.name(buf, buf.name)}[{buf.size}];")
        self.nested(s.body)
        self.emit("}")

    def visit_barrier(self, s: Barrier) -> None:
        self.emit(self.d.barrier)

    def visit_prefetch(self, s: Prefetch) -> None:
        raise ScheduleError(f"prefetch of {s.buffer.name}: a CPU schedule primitive (GPU "
                            "programs stage what they reuse in shared memory instead)")

    # ------------------------------------------------------------------ kernels
    def kernel(self, k: Kernel) -> list[str]:
        params = ", ".join(self.d.param.format(type=self.ctype(b.dtype),
                                               name=self.name(b, b.name)) for b in k.params)
        bounds = f"__launch_bounds__({k.threads_per_block}) " if self.d is CUDA else ""
        head = f"{self.d.kernel} {bounds}{k.name}({params}) {{"
        if self.d is OPENCL:
            head = (f"__attribute__((reqd_work_group_size({k.block[0]}, {k.block[1]}, "
                    f"{k.block[2]})))\n{head}")
        self.lines = []
        self.indent = 1
        for var, tag in k.indices.items():
            self.emit(f"const int {self.name(var, var.name)} = (int){self.d.indices[tag]};")
        for buf in k.shared:
            self.emit(self.d.shared.format(type=self.ctype(buf.dtype),
                                           name=self.name(buf, buf.name), size=buf.size))
        self.visit(k.body)
        return [head, *self.lines, "}"]

    def generate(self) -> str:
        bodies: list[str] = []
        for k in self.program.kernels:
            bodies += ["", *self.kernel(k)]
        return "\n".join([self.d.prelude, *self.helpers.values(), *bodies, ""])


def generate_gpu(program: GpuProgram, dialect: str) -> str:
    """The CUDA C (``dialect="cuda"``) or OpenCL C (``"opencl"``) source of ``program``."""
    return GpuCodegen(program, DIALECTS[dialect]).generate()


def _lanes_outside_divisions(index: Expr, lane: Var, lanes: int) -> Expr:
    """``index`` with each ``(x + lane) // c`` and ``(x + lane) % c`` taken apart where ``x``
    is a multiple of ``lanes`` and ``c`` of ``lanes`` (so the lanes never cross a multiple
    of ``c``): ``x // c`` and ``x % c + lane``. A fused cooperative fetch reads its tile's
    rows through such an index (``(t * 4 + lane) // 32 * 64 + (t * 4 + lane) % 32``); taken
    apart, its lanes are contiguous."""

    def rewrite(node: Expr) -> Expr | None:
        if not (isinstance(node, Binary) and node.op in ("floordiv", "floormod")
                and isinstance(node.b, Const) and node.b.value % lanes == 0):
            return None
        lin = arith.linear(node.a)
        if lin is None or lin.terms.get(lane.key()) != 1:
            return None
        rest = arith.simplify(node.a - lane)
        if lane in free_vars(rest):
            return None
        aligned = arith.simplify(Binary("floormod", rest, Const(lanes, rest.dtype), rest.dtype))
        if not (isinstance(aligned, Const) and aligned.value == 0):
            return None
        return Binary(node.op, rest, node.b, node.dtype) + (lane if node.op == "floormod" else 0)

    return arith.simplify(transform(index, rewrite))
