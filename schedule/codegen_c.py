"""C code generation for CPU targets from the loop IR.

The program is one small translation unit: standard C headers only, GCC vector
extensions for vector code (types and helpers emitted on demand), OpenMP for
parallel loops, stack arrays for buffers computed inside loops, aligned heap
arrays for whole intermediate tensors, and named variables for promoted
register tiles.

Before printing, the loop IR is flattened, nests tensorized with the CPU's 8-bit dot
product become vector statements (``cpu_intrin``), and it is vectorized (a vectorized loop
is first cut where a condition on its variable changes, ``partition``); then accumulators
that stay put across a reduction are kept in registers over it (``hoist``), and register
tiles are promoted to variables. A kernel with dot products on an AVX-512 target is printed
twice, with VNNI's ``vpdpbusd`` and in plain C, and its entry point calls the copy the CPU
it runs on can execute.
"""

from __future__ import annotations

import math

from . import dtype as dt
from . import vmath
from .arith import const_bounds
from .buffers import buffer_alignment
from .chains import reduction_chain
from .cpu_intrin import DOT_CALL, lower_dot_products
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
)
from .hoist import hoist_accumulators
from .inplace import store_in_place
from .loop_ir import (
    Allocate,
    Buffer,
    For,
    LoweredFunc,
    Prefetch,
    Store,
    VStore,
)
from .schedule import ScheduleError
from .source_printer import SourcePrinter
from .vectorize import (
    Broadcast,
    Lanes,
    StridedLoad,
    VLoad,
    flatten,
    promote_registers,
    shuffle_plan,
    split_vector_dtype,
    vectorize,
)

# The instruction set of the kernel copy that uses VNNI dot products.
_VNNI = "avx512vnni"

# Buffers computed inside loops go on the stack up to this size; larger ones on the heap.
MAX_STACK_BYTES = 256 * 1024
#: above twice this many parts a tree helper keeps this many running results (4 AVX-512
#: or 8 AVX2 vectors of float32) and folds the parts into them as it reads them
TREE_BLOCK = 64
#: the C of each chain operator (``chains.CHAIN_OPS``): (name, expression of a0 and a1),
#: max and min as the C code generator prints them elsewhere
_TREE_OPS = {"+": ("add", "a0 + a1"), "max": ("max", "a0 > a1 ? a0 : a1"),
             "min": ("min", "a0 < a1 ? a0 : a1")}

_PRELUDE = """\
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
"""

# The timing loop lives in the generated code, so no Python runs inside the timed region.
# Like TVM's time evaluator: one warm-up call (unless `warm_s` >= 0: the caller made it,
# e.g. outside a window in which it watches for other work, and it took `warm_s` seconds);
# then per repeat, optionally evict the caches by writing a scratch buffer, and time
# `number` calls, growing `number` until a repeat lasts at least `min_repeat_ms`.
# results[r] is the mean seconds per call of repeat r.
# `number` is predicted rather than doubled: from the warm-up call (rounded down, as a
# cold call is slower) and from each too-short repeat (with a 20% margin), so a 5 ms kernel
# spends about one short repeat calibrating instead of four. A repeat ends once it has
# lasted 4x `min_repeat_ms` (checked every 8 calls), whatever `number` said: when other
# work takes a core after the warm-up, each call can run 70x slower (a softmax of 55 us,
# 4 ms, beside a busy loop), and 3 repeats of 100 ms planned from the warm-up took 20 s.
_TIMER = """\
static double tt_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int32_t %(name)s_time(%(params)s, int32_t number, int32_t repeat, int32_t min_repeat_ms,
                      int64_t flush_bytes, double warm_s, double* results) {
  volatile char* scratch = NULL;
  if (flush_bytes > 0) {
    scratch = (volatile char*)malloc((size_t)flush_bytes);
    if (scratch == NULL) return -1;
  }
  double want = 1e-3 * (double)min_repeat_ms;
  double warm = warm_s;
  int32_t code = 0;
  if (warm_s < 0.0) {
    double warm_start = tt_now();
    code = %(name)s(%(args)s);
    warm = tt_now() - warm_start;
  }
  if (code != 0) { free((void*)scratch); return code; }
  if (number < 1) number = 1;
  if (warm > 0.0 && want / warm > (double)number) {
    number = want / warm >= (double)(1 << 30) ? (1 << 30) : (int32_t)(want / warm);
  }
  for (int32_t r = 0; r < repeat; ++r) {
    for (;;) {
      if (scratch != NULL) {
        for (int64_t i = 0; i < flush_bytes; i += 64) scratch[i] = (char)(i + r);
      }
      double start = tt_now();
      int32_t done = 0;
      while (done < number) {
        code |= %(name)s(%(args)s);
        if ((++done & 7) == 0 && want > 0.0 && tt_now() - start > 4.0 * want) break;
      }
      double elapsed = tt_now() - start;
      if (elapsed * 1000.0 >= (double)min_repeat_ms || done >= (1 << 30)) {
        results[r] = elapsed / (double)done;
        break;
      }
      double grow = elapsed > 0.0 ? 1.2 * want / elapsed : 1024.0;
      if (grow > 1024.0) grow = 1024.0;
      double next = (double)number * grow;
      number = next >= (double)(1 << 30) ? (1 << 30)
               : (next < (double)number + 1.0 ? number + 1 : (int32_t)next);
    }
  }
  free((void*)scratch);
  return code;
}
"""

# Names a tensor or axis may not take in C (keywords, and names the generated code uses).
_RESERVED = frozenset([
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "main",
    "tt_failed", "NULL", "INFINITY", "NAN",
])

_SCALAR_MATH = {
    "exp": "expf", "log": "logf", "sqrt": "sqrtf", "tanh": "tanhf", "erf": "erff",
    "floor": "floorf", "ceil": "ceilf", "pow": "powf", "abs": "fabsf",
}


#: x86 float32 min/max instructions by vector bits: (the condition they exist under, their
#: builtin's name stem, the arguments after the two operands). Their lanes are
#: ``a0 > a1 ? a0 : a1`` (max) exactly, NaNs included. The builtins are called directly:
#: including immintrin.h would double a kernel's compile time.
_X86_MIN_MAX = {
    128: ("defined(__SSE__)", "ps", ""),
    256: ("defined(__AVX__)", "ps256", ""),
    512: ("defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)", "ps512_mask",
          ", a0, (unsigned short)-1, 4"),
}


def _x86_min_max(op: str, base: str, lanes: int) -> tuple[str, str] | None:
    """(condition, expression of a0 and a1) for a float32 vector min or max as one
    instruction, or None. Written lane by lane, GCC may split the vectors into scalars —
    loop and all — when their lanes are read one by one afterwards (a factored row max
    folded as a tree of its lanes: 2.7x slower)."""
    entry = _X86_MIN_MAX.get(32 * lanes) if base == "float32" else None
    if entry is None:
        return None
    condition, stem, rest = entry
    return condition, f"__builtin_ia32_{op}{stem}(a0, a1{rest})"


def _tree_helper(name: str, ct: str, n: int, combine: str) -> str:
    """C of a helper folding ``n`` parts from a pointer with ``combine`` (of a0 and a1).
    Up to ``2 * TREE_BLOCK`` parts: copied to the stack, then halves combined pairwise.
    More: ``TREE_BLOCK`` running results, each folding every ``TREE_BLOCK``-th part straight
    from the pointer (whole vectors in registers: a softmax row's max read its 3072
    floats once, not copied and re-read; 1.17x on that program), then those combined
    pairwise. A sum is re-associated either way, never less accurately than in order."""
    fold = f"{{ {ct} a0 = t[i], a1 = "
    if n < 2 * TREE_BLOCK:
        width, start = n, f"  for (int i = 0; i < {n}; ++i) t[i] = p[i];\n"
    else:
        width, whole = TREE_BLOCK, n - n % TREE_BLOCK
        start = (f"  for (int i = 0; i < {width}; ++i) t[i] = p[i];\n"
                 f"  for (int b = {width}; b < {whole}; b += {width})\n"
                 f"    for (int i = 0; i < {width}; ++i) {fold}p[b + i]; t[i] = {combine}; }}\n")
        if n % TREE_BLOCK:
            start += (f"  for (int i = 0; i < {n % TREE_BLOCK}; ++i) "
                      f"{fold}p[{whole} + i]; t[i] = {combine}; }}\n")
    return (f"static inline {ct} {name}(const {ct}* p) {{\n"
            f"  {ct} t[{width}];\n{start}"
            f"  for (int w = {width}; w > 1; w = (w + 1) / 2) {{\n"
            f"    int h = (w + 1) / 2;\n"
            f"    for (int i = 0; i < w - h; ++i) {fold}t[i + h]; t[i] = {combine}; }}\n"
            f"  }}\n  return t[0];\n}}")


class CCodegen(SourcePrinter):
    """Prints one lowered function; statements are emitted by the ``visit_*`` methods as
    lines at the current ``indent``."""

    def __init__(self, func: LoweredFunc, vector_bytes: int, threads: int,
                 x86_vnni: bool = False, masked_tails: bool = False):
        super().__init__(_RESERVED)
        self.func = func
        self.vector_bytes = vector_bytes
        self.threads = threads
        self.x86_vnni = x86_vnni
        self.masked_tails = masked_tails
        self.uses_dot = False
        self.types: dict[str, str] = {}  # vector dtype -> typedef line
        self.helpers: dict[str, str] = {}
        self.promoted: dict[Buffer, int] = {}
        self.in_parallel = False
        self.uses_math = False

    # ------------------------------------------------------------------ names
    def vtype(self, dtype: str) -> str:
        base, lanes = split_vector_dtype(dtype)
        if lanes == 1:
            return dt.c_type(base)
        if base == "bool":  # comparison masks are signed ints as wide as the operands
            base = "int32"
        name = f"tt_{base}x{lanes}"
        if name not in self.types:
            # Vectors are read and written in place through the ``_mem`` type (aligned
            # like one element, aliasing the buffers' scalar type), not by memcpy: GCC's
            # generic tuning copies 32 bytes by memcpy in 16-byte pieces through the stack,
            # which made every vectorized AVX2 kernel several times slower (a GEMM 17x).
            item, c_type = dt.itemsize(base), dt.c_type(base)
            self.types[name] = (
                f"typedef {c_type} {name} __attribute__((vector_size({item * lanes})));\n"
                f"typedef {c_type} {name}_mem __attribute__((vector_size({item * lanes}), "
                f"aligned({item}), may_alias));")
        return name

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return self.name(e, e.name)
        if isinstance(e, Const):
            return _const(e)
        if isinstance(e, VLoad):
            vt = self.vtype(e.dtype)
            if e.buffer in self.promoted:
                return self._reg(e.buffer, int(e.base.value))
            if e.active < e.lanes:
                helper = f"tt_load_{vt.removeprefix('tt_')}_first{e.active}"
                self.helpers.setdefault(helper, (
                    f"static inline {vt} {helper}(const void* p) "
                    f"{{ return {self._masked_load(vt, e.dtype, e.active, 'p')}; }}"))
            else:
                helper = f"tt_load_{vt.removeprefix('tt_')}"
                self.helpers.setdefault(helper, (
                    f"static inline {vt} {helper}(const void* p) "
                    f"{{ return *(const {vt}_mem*)p; }}"))
            return f"{helper}(&{self.buf_name(e.buffer)}[{self.expr(e.base)}])"
        if isinstance(e, StridedLoad):
            return f"{self._strided_helper(e)}(&{self.buf_name(e.buffer)}[{self.expr(e.base)}])"
        if isinstance(e, Broadcast):
            vt = self.vtype(e.dtype)
            return f"(({vt}){{0}} + ({self.expr(e.value)}))"
        if isinstance(e, Lanes):
            return f"(({self.vtype(e.dtype)}){{{', '.join(self.expr(v) for v in e.values)}}})"
        if isinstance(e, Load):
            buf = e.source
            if buf in self.promoted:
                return self._reg(buf, int(e.indices[0].value))
            return f"{self.buf_name(buf)}[{self.expr(e.indices[0])}]"
        lanes = split_vector_dtype(e.dtype)[1]
        if isinstance(e, Compare | Logic):
            op = {"and": "&&", "or": "||"}.get(e.op, e.op) if lanes == 1 else \
                {"and": "&", "or": "|"}.get(e.op, e.op)
            return f"({self.expr(e.a)} {op} {self.expr(e.b)})"
        if isinstance(e, Binary):
            return self._binary(e, lanes)
        if isinstance(e, Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, Select):
            if lanes > 1 and split_vector_dtype(e.cond.dtype)[1] > 1:
                # a per-lane choice: both sides are computed (vectorize only allows this
                # when neither side reads memory)
                return self._lane_helper("select", e.dtype, [e.cond, e.true_value, e.false_value],
                                         "a0[l] ? a1[l] : a2[l]")
            # one condition for all lanes: C's ?: evaluates only the chosen side
            return f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : " \
                   f"{self.expr(e.false_value)})"
        if isinstance(e, Cast):
            if lanes > 1:
                return f"__builtin_convertvector({self.expr(e.value)}, {self.vtype(e.dtype)})"
            return f"(({dt.c_type(e.dtype)})({self.expr(e.value)}))"
        if isinstance(e, Call):
            return self._call(e, lanes)
        raise ScheduleError(f"C code generation: unsupported expression {type(e).__name__}")

    def _strided_helper(self, e: StridedLoad) -> str:
        """A function reading ``e``'s lanes from a pointer to its first element: whole
        vectors over the span, combined by two-vector shuffles (``shuffle_plan``); with
        masked-off lanes, each vector load is masked to the span of the active ones."""
        vt = self.vtype(e.dtype)
        masked = f"_first{e.active}" if e.active < e.lanes else ""
        helper = f"tt_load_{vt.removeprefix('tt_')}_stride{e.stride}{masked}"
        if helper not in self.helpers:
            offsets, steps = shuffle_plan(e.lanes, e.stride)
            size = dt.itemsize(e.buffer.dtype)
            span = (e.active - 1) * e.stride + 1  # elements from the first to the last read

            def load(offset: int) -> str:
                address = f"p + {offset * size}"
                if span - offset >= e.lanes:
                    return f"*(const {vt}_mem*)({address})"
                if span <= offset:
                    return f"({vt}){{0}}"
                return self._masked_load(vt, e.dtype, span - offset, address)

            loads = " ".join(f"{vt} v{j} = {load(offset)};" for j, offset in enumerate(offsets))
            combine = " ".join(
                f"r = __builtin_shufflevector({'v0' if j == 1 else 'r'}, v{j}, "
                f"{', '.join(map(str, indices))});" for j, indices in enumerate(steps, start=1))
            self.helpers[helper] = (f"static inline {vt} {helper}(const void* q) {{ "
                                    f"const char* p = (const char*)q; {loads} {vt} r; "
                                    f"{combine} return r; }}")
        return helper

    def _masked_load(self, vt: str, dtype: str, active: int, address: str) -> str:
        """An AVX-512 load of the first ``active`` lanes of a ``dtype`` vector, the others
        zero (nothing past them is read, so it may end where a buffer does)."""
        prefix, element_bits = self._masked_intrinsic(dtype)
        return (f"({vt}){prefix}_maskz_loadu_epi{element_bits}("
                f"{(1 << active) - 1}ULL, {address})")

    def _masked_intrinsic(self, dtype: str) -> tuple[str, int]:
        """The AVX-512 intrinsics' prefix (``_mm512``, ``_mm256``, ``_mm``) and element
        width for masked loads and stores of a vector dtype (``vectorize`` masks only these
        sizes); the kernel then includes their header."""
        self.helpers.setdefault("immintrin", "#include <immintrin.h>")
        base, lanes = split_vector_dtype(dtype)
        element_bits = dt.itemsize(base) * 8
        prefix = {128: "_mm", 256: "_mm256", 512: "_mm512"}[element_bits * lanes]
        return prefix, element_bits

    def _binary(self, e: Binary, lanes: int) -> str:
        base = split_vector_dtype(e.dtype)[0]
        if e.op in ("+", "-", "*", "/"):
            return f"({self.expr(e.a)} {e.op} {self.expr(e.b)})"
        if e.op in ("min", "max"):
            cmp = "<" if e.op == "min" else ">"
            if lanes > 1:
                return self._lane_helper(e.op, e.dtype, [e.a, e.b],
                                         f"a0[l] {cmp} a1[l] ? a0[l] : a1[l]",
                                         _x86_min_max(e.op, base, lanes))
            return self._scalar_helper(e.op, base, 2, f"a0 {cmp} a1 ? a0 : a1", [e.a, e.b])
        if e.op in ("floordiv", "floormod"):
            if lanes > 1:
                body = ("(a0[l] / a1[l]) - ((a0[l] % a1[l] != 0) && ((a0[l] < 0) != (a1[l] < 0)))"
                        if e.op == "floordiv" else
                        "((a0[l] % a1[l]) + a1[l]) % a1[l]")
                return self._lane_helper(e.op, e.dtype, [e.a, e.b], body)
            if isinstance(e.b, Const) and e.b.value > 0 and _nonnegative(e.a):
                op = "/" if e.op == "floordiv" else "%"
                return f"({self.expr(e.a)} {op} {self.expr(e.b)})"
            body = ("(a0 / a1) - ((a0 % a1 != 0) && ((a0 < 0) != (a1 < 0)))"
                    if e.op == "floordiv" else "((a0 % a1) + a1) % a1")
            return self._scalar_helper(e.op, base, 2, body, [e.a, e.b])
        raise ScheduleError(f"C code generation: unsupported operator {e.op}")

    def _scalar_fn(self, name: str, dtype: str) -> str:
        self.uses_math = True
        if name == "sigmoid":
            return self._define_scalar("sigmoid", dtype, 1, "1.0f / (1.0f + expf(-a0))")
        if name == "rsqrt":
            return self._define_scalar("rsqrt", dtype, 1, "1.0f / sqrtf(a0)")
        if name == "abs" and dt.is_int(dtype):
            return self._define_scalar("abs", dtype, 1, "a0 < 0 ? -a0 : a0")
        return _SCALAR_MATH[name]

    def _call(self, e: Call, lanes: int) -> str:
        if e.name == DOT_CALL:
            return self._dot(e)
        base = split_vector_dtype(e.dtype)[0]
        if lanes > 1 and base == "float32" and e.name in vmath.FUNCTIONS:
            return self._vector_math(e, lanes)
        fn = self._scalar_fn(e.name, base)
        if lanes > 1:
            args = ", ".join(f"a{i}[l]" for i in range(len(e.args)))
            return self._lane_helper(e.name, e.dtype, list(e.args), f"{fn}({args})")
        args = ", ".join(f"(float)({self.expr(a)})" if base == "float16" else self.expr(a)
                         for a in e.args)
        text = f"{fn}({args})"
        return f"((_Float16){text})" if base == "float16" else text

    def _dot(self, e: Call) -> str:
        """The 8-bit dot product of ``cpu_intrin``: plain C here; ``generate`` makes a
        copy of the kernel calling the VNNI version where the target allows it."""
        acc, word, block = (self.vtype(a.dtype) for a in e.args)
        self.uses_dot = True
        self.helpers.setdefault("tt_dot_u8i8", (
            f"static inline {acc} tt_dot_u8i8({acc} acc, {word} a, {block} b) {{\n"
            "  for (int l = 0; l < 16; ++l)\n"
            "    acc[l] += (int32_t)a[0] * b[4 * l] + (int32_t)a[1] * b[4 * l + 1]\n"
            "            + (int32_t)a[2] * b[4 * l + 2] + (int32_t)a[3] * b[4 * l + 3];\n"
            "  return acc;\n}"))
        if self.x86_vnni:
            self.helpers.setdefault("tt_dot_u8i8_vnni", (
                "#include <immintrin.h>\n"
                f"__attribute__((target(\"{_VNNI}\")))\n"
                f"static inline {acc} tt_dot_u8i8_vnni({acc} acc, {word} a, {block} b) {{\n"
                "  int32_t word;\n  memcpy(&word, &a, sizeof word);\n"
                f"  return ({acc})_mm512_dpbusd_epi32((__m512i)acc, _mm512_set1_epi32(word), "
                "(__m512i)b);\n}"))
        args = ", ".join(self.expr(a) for a in e.args)
        return f"tt_dot_u8i8({args})"

    def _vector_math(self, e: Call, lanes: int) -> str:
        """A call of ``vmath``'s vector version (float16 loops are never vectorized)."""
        vt = self.vtype(e.dtype)
        for name, text in vmath.definitions(e.name, vt, self.vtype(f"int32x{lanes}"),
                                            f"f32x{lanes}", lanes):
            self.helpers.setdefault(name, text)
        (arg,) = e.args
        text = self.expr(arg)
        if split_vector_dtype(arg.dtype)[1] == 1:
            text = f"(({vt}){{0}} + ({text}))"
        return f"tt_v{e.name}_f32x{lanes}({text})"

    def _define_scalar(self, op: str, dtype: str, nargs: int, body: str) -> str:
        ct = dt.c_type(dtype)
        name = f"tt_{op}_{dtype}"
        params = ", ".join(f"{ct} a{i}" for i in range(nargs))
        self.helpers.setdefault(name, f"static inline {ct} {name}({params}) "
                                      f"{{ return {body}; }}")
        return name

    def _scalar_helper(self, op: str, dtype: str, nargs: int, body: str,
                       args: list[Expr]) -> str:
        name = self._define_scalar(op, dtype, nargs, body)
        return f"{name}({', '.join(self.expr(a) for a in args)})"

    def _lane_helper(self, op: str, dtype: str, args: list[Expr], body: str,
                     native: tuple[str, str] | None = None) -> str:
        """A call of a helper computing ``body`` (of ``a0[l]``, ``a1[l]``, ...) lane by lane;
        with ``native`` (a preprocessor condition, a vector expression of ``a0``, ``a1``,
        ...) the helper computes that expression where the condition holds."""
        vt = self.vtype(dtype)
        lanes = split_vector_dtype(dtype)[1]
        arg_types = []
        for a in args:
            a_lanes = split_vector_dtype(a.dtype)[1]
            arg_types.append(self.vtype(a.dtype) if a_lanes > 1
                             else self.vtype(f"{split_vector_dtype(a.dtype)[0]}x{lanes}"))
        name = f"tt_v{op}_{'_'.join(arg_types)}"
        params = ", ".join(f"{t} a{i}" for i, t in enumerate(arg_types))
        loop = f"{{ {vt} r; for (int l = 0; l < {lanes}; ++l) r[l] = {body}; return r; }}"
        if native is None:
            self.helpers.setdefault(name, f"static inline {vt} {name}({params}) {loop}")
        else:
            condition, vector = native
            self.helpers.setdefault(name, (
                f"static inline {vt} {name}({params}) {{\n#if {condition}\n"
                f"  return ({vt})({vector});\n#else\n  {loop}\n#endif\n}}"))
        texts = []
        for a, t in zip(args, arg_types, strict=True):
            text = self.expr(a)
            if split_vector_dtype(a.dtype)[1] == 1:
                text = f"(({t}){{0}} + ({text}))"
            texts.append(text)
        return f"{name}({', '.join(texts)})"

    def _reg(self, buf: Buffer, index: int) -> str:
        lanes = self.promoted[buf]
        return f"{self.buf_name(buf)}_r{index // lanes}"

    def buf_name(self, buf: Buffer) -> str:
        return self.name(buf, buf.name)

    # ------------------------------------------------------------------ statements
    def visit_store(self, s: Store) -> None:
        buf = s.buffer
        if buf in self.promoted:
            target = self._reg(buf, int(s.indices[0].value))
        else:
            target = f"{self.buf_name(buf)}[{self.expr(s.indices[0])}]"
        self.emit(f"{target} = {self.expr(s.value)};")

    def visit_prefetch(self, s: Prefetch) -> None:
        # (GCC's builtin: a read, kept in every cache level; it never faults)
        self.emit(f"__builtin_prefetch(&{self.buf_name(s.buffer)}[{self.expr(s.indices[0])}]);")

    def visit_vstore(self, s: VStore) -> None:
        if s.buffer in self.promoted:
            self.emit(f"{self._reg(s.buffer, int(s.base.value))} = {self.expr(s.value)};")
            return
        vt = self.vtype(s.value.dtype)
        if s.active < s.lanes:  # the masked-off lanes are past the loop's end: not written
            prefix, element_bits = self._masked_intrinsic(s.value.dtype)
            self.emit(f"{prefix}_mask_storeu_epi{element_bits}("
                      f"&{self.buf_name(s.buffer)}[{self.expr(s.base)}], "
                      f"{(1 << s.active) - 1}ULL, ({prefix.replace('_mm', '__m')}i)"
                      f"({self.expr(s.value)}));")
            return
        self.emit(f"*({vt}_mem*)&{self.buf_name(s.buffer)}[{self.expr(s.base)}] = "
                  f"{self.expr(s.value)};")

    def visit_for(self, s: For) -> None:
        if self._tree_reduction(s):
            return
        var = self.name(s.var, s.var.name)
        kind = s.kind
        if kind == For.TENSORIZED:
            raise ScheduleError(f"loop {s.var.name} is tensorized: the intrinsic has no CPU "
                                "code generation")
        if kind not in (For.SERIAL, For.PARALLEL, For.UNROLLED, For.VECTORIZED):
            raise ScheduleError(f"loop {s.var.name} is bound to {kind}, which needs a GPU "
                                "target; the cpu target cannot bind threads")
        was_parallel = self.in_parallel
        if kind == For.PARALLEL:
            if self.in_parallel:
                raise ScheduleError(f"parallel loop {s.var.name} is nested inside another "
                                    "parallel loop")
            self.emit(f"#pragma omp parallel for num_threads({self.threads}) schedule(static)")
            self.in_parallel = True
        elif kind == For.UNROLLED:
            self.emit("#pragma GCC unroll 16")
        elif s.pragmas.get("simd"):
            self.emit("#pragma GCC ivdep")
        extent = self.expr(s.extent)
        ctype = dt.c_type(s.var.dtype)
        self.emit(f"for ({ctype} {var} = 0; {var} < {extent}; ++{var}) {{")
        self.nested(s.body)
        self.emit("}")
        self.in_parallel = was_parallel

    def _tree_reduction(self, s: For) -> bool:
        """Print a rolled reduction chain (``chains``) whose parts lie in memory one after
        another as one call of a helper (``_tree_helper``) whose dependent chain is about
        log2(n) steps, or n / ``TREE_BLOCK`` for long folds, not n, in vector operations.
        False, and nothing printed, for any other loop."""
        chain = reduction_chain(s)
        if chain is None or s.kind != For.SERIAL or chain.part.source in self.promoted:
            return False
        base = chain.contiguous_base()
        if base is None:
            return False
        store, index = chain.store, chain.store.indices[0]
        n, op, dtype = chain.parts, chain.op, store.value.dtype
        ct = dt.c_type(dtype)
        name = f"tt_tree_{_TREE_OPS[op][0]}_{dtype}_{n}"
        self.helpers.setdefault(name, _tree_helper(name, ct, n, _TREE_OPS[op][1]))
        tree = f"{name}(&{self.buf_name(chain.part.source)}[{self.expr(base)}])"
        if op == "+":
            text = f"({self.expr(chain.acc)} + {tree})"
        else:
            combine = self._define_scalar(op, dtype, 2, _TREE_OPS[op][1])
            text = f"{combine}({self.expr(chain.acc)}, {tree})"
        if store.buffer in self.promoted:
            target = self._reg(store.buffer, int(index.value))
        else:
            target = f"{self.buf_name(store.buffer)}[{self.expr(index)}]"
        self.emit(f"{target} = {text};")
        return True

    def visit_allocate(self, s: Allocate) -> None:
        buf = s.buffer
        name = self.buf_name(buf)
        ct = dt.c_type(buf.dtype)
        # Each allocation is a block of its own: unrolling may repeat it in one scope.
        self.emit("{")
        if buf in self.promoted:
            lanes = self.promoted[buf]
            vt = self.vtype(f"{buf.dtype}x{lanes}") if lanes > 1 else ct
            regs = ", ".join(f"{name}_r{i}" for i in range(buf.size // lanes))
            self.emit(f"{vt} {regs};", 1)
            self.nested(s.body)
        elif buf.nbytes <= MAX_STACK_BYTES and self.indent > 1:
            self.emit(f"{ct} {name}[{buf.size}] __attribute__((aligned(64)));", 1)
            self.nested(s.body)
        else:
            # On the heap; if that fails the kernel skips this part and returns -1 (a return
            # statement cannot leave an OpenMP parallel loop).
            # (on a page from a page on, as ``buffers``: laid out alike in every process)
            align = buffer_alignment(buf.nbytes)
            size = -(-buf.nbytes // align) * align
            self.emit(f"{ct}* restrict {name} = ({ct}*)aligned_alloc({align}, {size});", 1)
            self.emit(f"if ({name} == NULL) {{", 1)
            self.emit("#pragma omp atomic write", 2)
            self.emit("tt_failed = 1;", 2)
            self.emit("} else {", 1)
            self.nested(s.body, 2)
            self.emit(f"free({name});", 2)
            self.emit("}", 1)
        self.emit("}")

    # ------------------------------------------------------------------ function
    def generate(self) -> str:
        body = vectorize(lower_dot_products(store_in_place(flatten(self.func.body))),
                         self.vector_bytes, self.masked_tails)
        body = hoist_accumulators(body, in_registers=promote_registers(body))
        self.promoted = promote_registers(body)
        params = []
        for buf in self.func.args:
            params.append(f"{dt.c_type(buf.dtype)}* restrict {self.buf_name(buf)}")
        self.indent = 1
        self.visit(body)
        lines = self.lines
        header = [_PRELUDE]
        header += list(self.types.values())
        header += list(self.helpers.values())
        name = entry_name(self.func)
        args = ", ".join(self.buf_name(b) for b in self.func.args)
        signature = f"int32_t {name}({', '.join(params)})"
        body_lines = ["  int32_t tt_failed = 0;", *lines, "  return tt_failed ? -1 : 0;", "}"]
        timer = _TIMER % {"name": name, "params": ", ".join(params), "args": args}
        if not (self.uses_dot and self.x86_vnni):
            return "\n".join([*header, "", f"{signature} {{", *body_lines, "", timer])
        # Two copies of the kernel; the entry point picks one for the CPU it runs on.
        vnni = [line.replace("tt_dot_u8i8(", "tt_dot_u8i8_vnni(") for line in body_lines]
        return "\n".join([
            *header, "", f"__attribute__((target(\"{_VNNI}\")))",
            f"static int32_t {name}_vnni({', '.join(params)}) {{", *vnni, "",
            f"static int32_t {name}_plain({', '.join(params)}) {{", *body_lines, "",
            f"{signature} {{", "  __builtin_cpu_init();",
            f"  return __builtin_cpu_supports(\"avx512vnni\") ? {name}_vnni({args}) "
            f": {name}_plain({args});", "}", "", timer])


def _nonnegative(e: Expr) -> bool:
    bounds = const_bounds(e, {})
    if bounds is not None:
        return bounds[0] >= 0
    # loop variables are non-negative; sums and products of them too
    if isinstance(e, Var):
        return True
    if isinstance(e, Binary) and e.op in ("+", "*", "floordiv", "floormod"):
        return _nonnegative(e.a) and _nonnegative(e.b)
    return False


def _const(c: Const) -> str:
    if c.dtype == "bool":
        return "1" if c.value else "0"
    if dt.is_float(c.dtype):
        v = float(c.value)
        if math.isinf(v):
            text = "INFINITY" if v > 0 else "(-INFINITY)"
        elif math.isnan(v):
            text = "NAN"
        else:
            text = repr(v)
            if "e" not in text and "." not in text:
                text += ".0"
            text += "f"
        return text if c.dtype == "float32" else f"((_Float16){text})"
    if c.dtype == "int64":
        return f"INT64_C({c.value})"
    if c.dtype in ("int8", "uint8"):
        return f"(({dt.c_type(c.dtype)}){c.value})"
    return str(c.value) if c.value >= -(2**31) + 1 else f"({c.value})"


def entry_name(func: LoweredFunc) -> str:
    return f"tt_{func.name}"


def generate_c(func: LoweredFunc, vector_bytes: int, threads: int,
               x86_vnni: bool = False, masked_tails: bool = False) -> str:
    """C source of a lowered function. The entry point ``entry_name(func)`` takes the argument
    arrays and returns 0, or -1 when a heap buffer could not be allocated; ``<entry>_time``
    takes the same arrays and then (number, repeat, min_repeat_ms, flush_bytes, results).

    ``x86_vnni`` (for AVX-512 targets): 8-bit dot products use ``vpdpbusd`` on a CPU that
    has AVX-512 VNNI (checked at each call), plain vector C on one that does not.
    ``masked_tails`` (AVX-512 targets): a vector loop's last lanes are one masked vector
    rather than several narrower ones (``vectorize``)."""
    return CCodegen(func, vector_bytes, threads, x86_vnni, masked_tails).generate()
