"""The virtual machine: runs programs with control flow (``if``, ``match``, closures,
recursion, references) that the graph executor refuses, with compiled kernels for their
fused operators.

``compile(module, target, schedules)`` runs the build's optimisation pipeline
(``ir.backend.optimize``: InferType, SimplifyInference, FoldConstant, FoldScaleAxis,
EliminateCommonSubexpr, DeadCodeElimination, FuseOps, InferType — every one of them works
scope by scope through ``let``/``if``/``match``/closures and keeps effects in order, so
the whole pipeline runs and workload keys are the ones ``ir.extract_tasks`` reports;
FuseOps works in graph normal form and fuses each branch on its own, so a pure value that
a ``let`` binds outside an ``if`` and the branches use is computed again in the branch),
compiles the module to bytecode (``vm_compiler``) and builds one kernel per distinct fused
workload: ``lower_primitive``, the steps ``schedules`` gives (a mapping from workload key,
or a callable ``workload -> steps | None``, as ``ir.build`` takes), else the default
(unscheduled) program, all compiled into one shared library. A fused function that cannot
be lowered or has a dynamic shape (``Any``) is a *fallback*, counted in
``VirtualMachine.stats`` and listed in ``VMExecutable.tasks``: it runs operator by
operator through the JIT (``ir.evaluate(..., mode="compiled")``), which compiles each
operator call for the concrete shapes it meets (default schedule, one kernel per distinct
call, kept for the process) and runs the operators without a lowering on numpy. A fused
function over 0-d tensors only (a loop counter's ``n - 1``, ``n == 0``) is a *scalar*
call: it runs on the host directly, the arithmetic costing less than a kernel call would
(one integer operator on Python integers, wrapped to its dtype; anything else on numpy).
A global function that some instruction invokes and that is a static dataflow graph (an
RNN cell: tensors and tuples of tensors in and out, every fused function with a kernel) is
also compiled ahead of time (``aot.compile_plan``, the same kernels and schedules) and
invoked as one native call (``VMStats.native_calls``) instead of its bytecode.

``VirtualMachine(executable)`` runs it: ``vm(*args, **kwargs)`` / ``vm.run(...)`` calls
``@main``, ``vm.invoke(name, ...)`` another global. Values are the interpreter's, so
results compare with ``ir.evaluate``: tensors are numpy arrays, tuples Python tuples, ADT
values ``ir.ADTValue``, references ``ir.RefValue``; a function value is a ``VMClosure``
(callable from Python). Arguments are converted like the interpreter's (Python numbers and
lists in the parameter's dtype) and checked against the parameter types in depth (the
shapes and dtypes of the tensors inside tuples and ADT values too: the kernels trust them).

The loop: one frame per call (a list of registers) on a heap stack — deep non-tail
recursion needs no Python recursion; tail calls reuse the frame. Instructions are linked
once per executable into tuples ``(opcode, operands...)`` whose call targets are the
callee's code, the constant or the kernel itself, and dispatched by an ``if`` chain on
small ints, most frequent first. A kernel call passes its arrays to the native function by
their buffers (``ctypes.c_byte.from_buffer``: no copy; arguments from Python are made
writable and contiguous once, on entry); a constant operand's pointer is made once, when
linking; an array that is still read-only or non-contiguous goes the slow way (the address
of a contiguous copy).

Errors at run time (no match clause, a kernel failure, bad arguments) raise ``VMError``
naming the function and instruction.
"""

from __future__ import annotations

import ctypes
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..expr import Call, Constant, Expr, Function, Op, Var
from ..interpreter import ADTValue, RefValue, evaluate
from ..module import Module
from ..types import (
    FuncType,
    GlobalTypeVar,
    RefType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    substitute,
)
from .aot import compile_plan
from .build import KernelSet, Schedules, TaskReport, optimize
from .graph_executor import GraphBuildError, plan_graph, plan_memory
from .lower import LoweredFunction, lower_primitive
from .vm_compiler import (
    Instruction,
    Invoke,
    InvokePacked,
    LoadConst,
    MakeClosure,
    Opcode,
    Program,
    TailInvoke,
    VMFunction,
    compile_program,
)

__all__ = ["VMClosure", "VMError", "VMExecutable", "VMStats", "VirtualMachine", "compile"]


class VMError(RuntimeError):
    """A failure while running a program on the VM (the message says what and where)."""


@dataclass
class VMStats:
    """Counters of a ``VirtualMachine`` since it was made (or ``reset``)."""

    instructions: int = 0
    #: InvokePacked calls run by a compiled kernel
    kernel_calls: int = 0
    #: InvokePacked calls run operator by operator by the JIT (dynamic shapes, no lowering)
    fallback_calls: int = 0
    #: InvokePacked calls of fused functions over 0-d tensors, run on the host
    scalar_calls: int = 0
    #: calls of static global functions run natively (one call into compiled C each)
    native_calls: int = 0

    def reset(self) -> None:
        self.instructions = self.kernel_calls = self.fallback_calls = 0
        self.scalar_calls = self.native_calls = 0


# A linked InvokePacked whose fused function has no kernel, and one over 0-d tensors (not
# ``Opcode``s: the VM's own)
_FALLBACK = len(Opcode)
_SCALAR = _FALLBACK + 1
# An Invoke of a static global function compiled ahead of time (one native call)
_NATIVE = _FALLBACK + 2


class _Code:
    """A linked function: instruction tuples, frame size, and what a call fills in."""

    __slots__ = ("code", "function", "padding", "self_register")

    def __init__(self, function: VMFunction):
        self.function = function
        self.code: list[tuple] = []
        #: the registers after the captured values and the arguments
        self.padding = [None] * (function.num_registers - function.num_captured
                                 - function.num_params)
        self.self_register = function.self_register

    @property
    def name(self) -> str:
        return self.function.name


class VMClosure:
    """A function value made by the VM: the function and its captured values. Calling it
    from Python runs it on the VM that made it."""

    __slots__ = ("captured", "code", "vm")

    def __init__(self, code: _Code, captured: tuple, vm: VirtualMachine):
        self.code, self.captured, self.vm = code, captured, vm

    def __call__(self, *args: object, **kwargs: object) -> object:
        fn = self.code.function
        values = _bind(fn, args, kwargs, self.vm.executable.module)
        regs = [*self.captured, *values, *self.code.padding]
        if self.code.self_register is not None:
            regs[self.code.self_register] = self
        return self.vm._execute(self.code, regs)

    def __repr__(self) -> str:
        return f"VMClosure(@{self.code.name})"


# ------------------------------------------------------------------------------ kernels

_POINTER = ctypes.POINTER(ctypes.c_byte)


def _address(a: np.ndarray) -> Any:
    """A pointer to ``a``'s data the slow way (a read-only array, such as a constant, or a
    non-contiguous one: a contiguous copy), which keeps the data alive."""
    return np.ascontiguousarray(a).ctypes.data_as(_POINTER)


def _kernel_function(fn: Any, outputs: list[tuple[tuple[int, ...], np.dtype]],
                     is_tuple: bool, name: str) -> Callable[[list, tuple], object]:
    """A callable ``run(registers, operands)`` running one compiled kernel, returning fresh
    output arrays. Each operand (in the kernel's argument order) is a register index or
    the pointer of a constant (made once, when linking)."""
    from schedule import allocator

    buf = ctypes.c_byte.from_buffer
    empties = [(allocator(shape, dtype), shape, dtype) for shape, dtype in outputs]

    def pointers(regs: list, operands: tuple) -> list:
        """The slow path: an input that is read-only or not C-contiguous."""
        return [(_address(regs[a]) if type(a) is int else a) for a in operands]

    def failed() -> VMError:
        return VMError(f"kernel {name} could not allocate a buffer")

    if not is_tuple:
        ((shape, dtype),) = outputs
        ((empty, _, _),) = empties

        def run(regs: list, operands: tuple) -> np.ndarray:
            out = empty(shape, dtype)
            try:
                args = [(buf(regs[a]) if type(a) is int else a) for a in operands]
            except (TypeError, ValueError):
                args = pointers(regs, operands)
            if fn(*args, buf(out)):
                raise failed()
            return out
        return run

    def run_tuple(regs: list, operands: tuple) -> tuple:
        outs = [empty(shape, dtype) for empty, shape, dtype in empties]
        try:
            args = [(buf(regs[a]) if type(a) is int else a) for a in operands]
        except (TypeError, ValueError):
            args = pointers(regs, operands)
        if fn(*args, *map(buf, outs)):
            raise failed()
        return tuple(outs)
    return run_tuple


def _jit_function(func: Function) -> Callable[[list, tuple], object]:
    """A fused function without a kernel of its own, run operator by operator by the JIT
    on the concrete shapes of each call (called like a kernel, on the registers of its
    arguments). Its results are made writable and C-contiguous (a numpy compute may
    return a view), as kernels take them."""
    def writable(a: object) -> object:
        return np.require(a, requirements=("C", "W")) if isinstance(a, np.ndarray) else a

    def run(regs: list, operands: tuple) -> object:
        out = evaluate(func, *[regs[a] for a in operands], mode="compiled")
        return tuple(map(writable, out)) if type(out) is tuple else writable(out)
    return run


def _external(func: Function) -> Callable[[list, tuple], object]:
    """A partitioned function, run by its external codegen's module."""
    from .external import external_function

    module = external_function(func)

    def run(regs: list, operands: tuple) -> object:
        out = module(*[regs[a] for a in operands])
        return tuple(np.require(o, requirements=("C", "W")) for o in out) \
            if type(out) is tuple else np.require(out, requirements=("C", "W"))
    return run


def _is_scalar(t: Type | None) -> bool:
    return isinstance(t, TensorType) and t.ndim == 0


def _scalar_function(func: Function) -> Callable[[list, tuple], object] | None:
    """``func`` run on numpy by its operators' computes when its parameters and result are
    0-d tensors and its body only calls operators (None otherwise)."""
    if not (all(_is_scalar(p.checked_type_or_none) for p in func.params)
            and _is_scalar(func.body.checked_type_or_none)):
        return None
    position = {id(p): i for i, p in enumerate(func.params)}

    def build(e: Expr) -> Callable[[list], Any] | None:
        if isinstance(e, Var) and id(e) in position:
            i = position[id(e)]
            return lambda args: args[i]
        if isinstance(e, Constant) and e.data.ndim == 0:
            value = e.data
            return lambda args: value
        if isinstance(e, Call) and isinstance(e.op, Op) and e.op.opdef.compute is not None:
            parts = [build(a) for a in e.args]
            if any(part is None for part in parts):
                return None
            compute, attrs = e.op.opdef.compute, e.attrs
            return lambda args: compute([part(args) for part in parts], attrs)
        return None

    body = func.body
    if isinstance(body, Call) and isinstance(body.op, Op) and body.op.opdef.compute \
            is not None and all(isinstance(a, Var) and id(a) in position for a in body.args):
        # one operator on the parameters (a loop counter's test or step): no layers
        picks = [position[id(a)] for a in body.args]
        integer = _integer_scalar_op(body, [func.params[i] for i in picks], picks)
        if integer is not None:
            return integer
        compute, attrs = body.op.opdef.compute, body.attrs

        def run_op(regs: list, operands: tuple) -> np.ndarray:
            return np.array(compute([regs[operands[i]] for i in picks], attrs))
        return run_op
    evaluate = build(body)
    if evaluate is None:
        return None

    def run(regs: list, operands: tuple) -> np.ndarray:
        return np.array(evaluate([regs[a] for a in operands]))
    return run


#: operators a 0-d integer function may compute on Python integers
_INTEGER_OPS: dict[str, Callable[[int, int], Any]] = {
    "add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
    "maximum": max, "minimum": min, "equal": operator.eq, "not_equal": operator.ne,
    "less": operator.lt, "less_equal": operator.le, "greater": operator.gt,
    "greater_equal": operator.ge}


def _integer_scalar_op(call: Call, params: list[Var],
                       picks: list[int]) -> Callable[[list, tuple], object] | None:
    """``call``, a binary operator on two 0-d integer tensors of one dtype (``params``,
    the function's parameters at positions ``picks``), computed on Python integers and
    wrapped to the dtype's width as numpy's arithmetic wraps (several times faster than
    numpy's 0-d path: a loop counter's ``n == 0``, ``n - 1``); None for anything else."""
    fn = _INTEGER_OPS.get(call.op.name)
    dtypes = {str(p.checked_type_or_none.dtype) for p in params}
    if fn is None or len(params) != 2 or len(dtypes) != 1:
        return None
    dtype = np.dtype(dtypes.pop())
    if dtype.kind not in "iu":
        return None
    out = np.dtype(str(call.checked_type_or_none.dtype))
    bits = 8 * dtype.itemsize
    span, low = 1 << bits, -(1 << (bits - 1)) if dtype.kind == "i" else 0
    a, b = picks
    array = np.array

    if out.kind == "b":
        def compare(regs: list, operands: tuple) -> np.ndarray:
            return array(fn(regs[operands[a]].item(), regs[operands[b]].item()))
        return compare

    def arithmetic(regs: list, operands: tuple) -> np.ndarray:
        value = fn(regs[operands[a]].item(), regs[operands[b]].item())
        return array((value - low) % span + low, out)
    return arithmetic


@dataclass
class _Packed:
    """How one InvokePacked runs: a kernel (its argument order), numpy on 0-d tensors, or
    the JIT fallback."""

    run: Callable[[list, tuple], object]
    #: for each kernel argument, the index of the fused function's parameter (None: numpy
    #: or the JIT, called on the parameters in order)
    order: list[int] | None
    scalar: bool = False


def _no_kernel(lowered: LoweredFunction) -> str:
    """Why a fused function runs on numpy ("" when it gets a kernel)."""
    if lowered.workload is None:
        return lowered.reason
    if any(0 in tuple(t.shape) for t in lowered.workload.tensors()):
        return "a zero-sized tensor"
    return ""


def _build_kernels(program: Program, target: Any, schedules: Schedules,
                   default_schedule: Callable[[Any], Any] | None
                   ) -> tuple[list[_Packed], list[TaskReport], Any, Any]:
    """One ``_Packed`` per fused function of the program (a kernel per distinct workload,
    all in one library); the task reports; the library's path and loaded handle (None
    without kernels)."""
    from schedule import compile_library

    scalars = [_scalar_function(p.function) for p in program.packed]
    lowered = [lower_primitive(p.function) for p in program.packed]
    reasons = [_no_kernel(low) for low in lowered]
    kernel_set = KernelSet(target, schedules, default_schedule, prefix="vm")
    for low, reason, scalar in zip(lowered, reasons, scalars, strict=True):
        if low.function.attrs.get("Compiler"):
            continue
        if scalar is not None:
            kernel_set.count_numpy(low.name, "0-d tensors only")
        elif reason:
            kernel_set.count_numpy(low.name, reason)
        else:
            kernel_set.entry(low)
    library = handle = None
    if kernel_set.sources:
        library, _ = compile_library(kernel_set.sources, tuple(target.compiler_flags()))
        handle = ctypes.CDLL(str(library))
    kernels: dict[str, Callable[[list, tuple], object]] = {}
    packed: list[_Packed] = []
    for low, reason, scalar in zip(lowered, reasons, scalars, strict=True):
        if low.function.attrs.get("Compiler"):
            packed.append(_Packed(_external(low.function), None))
            continue
        if scalar is not None:
            packed.append(_Packed(scalar, None, scalar=True))
            continue
        if reason:
            packed.append(_Packed(_jit_function(low.function), None))
            continue
        key = low.workload.key
        if key not in kernels:
            fn = getattr(handle, kernel_set.entries[key])
            fn.argtypes = [_POINTER] * (len(low.param_order) + len(low.out_types))
            fn.restype = ctypes.c_int32
            outs = [(tuple(int(d) for d in t.shape), np.dtype(t.dtype)) for t in low.out_types]
            is_tuple = isinstance(low.function.body.checked_type, TupleType)
            kernels[key] = _kernel_function(fn, outs, is_tuple, low.name)
        packed.append(_Packed(kernels[key], list(low.param_order)))
    return packed, kernel_set.reports, library, handle


def _invoked_globals(program: Program) -> set[int]:
    """The global functions some ``Invoke`` instruction calls."""
    return {ins.func for f in program.functions for ins in f.instructions
            if isinstance(ins, Invoke) and ins.func < len(program.globals)}


def _native_functions(fused: Module, program: Program, target: Any, schedules: Schedules,
                      default_schedule: Callable[[Any], Any] | None
                      ) -> tuple[dict[int, Callable[[list, tuple], object]], list[Any]]:
    """The invoked global functions that are static dataflow graphs (tensors and tuples of
    them in, out), each compiled ahead of time into one native call; the ``AotModel``s
    (kept alive with the executable)."""
    names = {index: name for name, index in program.globals.items()}
    natives: dict[int, Callable[[list, tuple], object]] = {}
    models = []
    for index in sorted(_invoked_globals(program)):
        func = fused[names[index]]
        try:
            plan = plan_graph(func, tuple_params=True)
            if not plan.calls:
                continue
            plan_memory(plan)
            model = compile_plan(func, plan, target, schedules, default_schedule)
        except GraphBuildError:  # not static, or a fused function without a kernel
            continue
        natives[index] = _native_call(model, func, names[index])
        models.append(model)
    return natives, models


def _native_call(model: Any, func: Function, name: str) -> Callable[[list, tuple], object]:
    """``run(registers, argument registers)`` calling ``model``'s library on the arguments'
    tensors (tuple arguments flattened in order), returning fresh outputs nested as
    ``func``'s result."""
    entry = model.pointer_entry(_POINTER)
    lock = model.lock
    paths: list[tuple[int, tuple[int, ...]]] = []

    def flatten(t: Type | None, position: int, path: tuple[int, ...]) -> None:
        if isinstance(t, TupleType):
            for i, f in enumerate(t.fields):
                flatten(f, position, (*path, i))
        else:
            paths.append((position, path))

    for position, p in enumerate(func.params):
        flatten(p.checked_type, position, ())
    outputs = [(tuple(o["shape"]), np.dtype(o["dtype"])) for o in model.meta["outputs"]]
    structure = model.meta["output_structure"]
    from schedule import allocator

    buf = ctypes.c_byte.from_buffer
    empties = [(allocator(shape, dtype), shape, dtype) for shape, dtype in outputs]

    in_order = structure == list(range(len(outputs)))  # a flat tuple of the outputs

    def nest(s: Any, outs: list) -> Any:
        return tuple(nest(x, outs) for x in s) if isinstance(s, list) else outs[s]

    flat = all(not path for _, path in paths)
    # the tensor each argument pointer was made for: a tensor passed again (a constant
    # weight, a loop's unchanged input) reuses its pointer, which keeps it alive
    held: list[Any] = [None] * len(paths)
    pointers: list[Any] = [None] * len(paths)

    def run(regs: list, operands: tuple) -> object:
        if flat:
            values = [regs[a] for a in operands]
        else:
            values = []
            for position, path in paths:
                v = regs[operands[position]]
                for i in path:
                    v = v[i]
                values.append(v)
        outs = [empty(shape, dtype) for empty, shape, dtype in empties]
        with lock:
            for k, v in enumerate(values):
                if v is not held[k]:
                    try:
                        pointers[k] = buf(v)
                    except (TypeError, ValueError):
                        pointers[k] = _address(v)
                    held[k] = v
            code = entry(*pointers, *map(buf, outs))
        if code:
            raise VMError(f"the native code of @{name} failed in call {code - 1} (could not "
                          "allocate a buffer)")
        return tuple(outs) if in_order else nest(structure, outs)
    return run


# --------------------------------------------------------------------------- executable


def _link(ins: Instruction, codes: list[_Code], constants: list[np.ndarray],
          packed: list[_Packed], const_registers: dict[int, Any],
          natives: Mapping[int, Callable[[list, tuple], object]]) -> tuple:
    """The tuple the VM runs for ``ins``: call targets, constants and kernels resolved.
    ``const_registers``: the function's registers loaded by ``LoadConst`` (each written
    once) and the pointers of their constants, passed to kernels directly. The opcode is a
    plain int (compared fastest)."""
    op = int(ins.opcode)
    if isinstance(ins, Invoke):
        native = natives.get(ins.func)
        if native is not None:
            return (_NATIVE, ins.dst, native, ins.args)
        return (op, ins.dst, codes[ins.func], ins.args)
    if isinstance(ins, MakeClosure):
        return (op, ins.dst, codes[ins.func], ins.captured)
    if isinstance(ins, TailInvoke):
        return (op, codes[ins.func], ins.args)
    if isinstance(ins, LoadConst):
        return (op, ins.dst, constants[ins.index])
    if isinstance(ins, InvokePacked):
        p = packed[ins.packed]
        if p.order is None:
            return (_SCALAR if p.scalar else _FALLBACK, ins.dst, p.run, ins.args)
        args = tuple(ins.args[i] for i in p.order)
        return (op, ins.dst, p.run, tuple(const_registers.get(a, a) for a in args))
    return (op, *ins.operands())


def _link_function(code: _Code, codes: list[_Code], program: Program,
                   packed: list[_Packed],
                   natives: Mapping[int, Callable[[list, tuple], object]]) -> None:
    loads = [ins for ins in code.function.instructions if isinstance(ins, LoadConst)]
    pointers = {ins.dst: _address(program.constants[ins.index]) for ins in loads}
    code.code = [_link(ins, codes, program.constants, packed, pointers, natives)
                 for ins in code.function.instructions]


@dataclass
class VMExecutable:
    """A compiled program: the bytecode, the kernels, and how each fused function runs."""

    program: Program
    module: Module  # the optimised, fused module the program was compiled from
    target: Any
    tasks: list[TaskReport] = field(default_factory=list)
    library: Any = None  # the kernel library's path (None: no kernels)
    build_seconds: float = 0.0
    codes: list[_Code] = field(default_factory=list, repr=False)
    _handle: Any = field(default=None, repr=False)  # the loaded library, kept loaded
    #: the static global functions run natively (their ``AotModel``s, kept loaded)
    natives: list[Any] = field(default_factory=list, repr=False)

    def disassemble(self) -> str:
        """The bytecode, then how each fused function runs."""
        lines = [self.program.disassemble()]
        lines += [f"{t.name}: " + (f"kernel {t.key}, {t.count} call site(s), "
                                   f"{'tuned' if t.tuned else 'default'} schedule"
                                   if t.key else f"{t.note}, {t.count} call site(s)")
                  for t in self.tasks]
        return "\n".join(lines) + "\n"


def compile(module: Module, target: Any = "cpu", schedules: Schedules = None,
            opt_level: int = 3, default_schedule: Callable[[Any], Any] | None = None
            ) -> VMExecutable:
    """Optimise and fuse ``module``, compile it to VM bytecode and build its kernels (see
    the module docstring). ``default_schedule(workload) -> steps`` schedules the kernels
    ``schedules`` has nothing for."""
    from schedule import Target

    start = time.perf_counter()
    target = target if isinstance(target, Target) else Target.parse(target)
    fused = optimize(module, opt_level, target)
    if "main" not in fused:
        raise VMError("the module has no @main function")
    program = compile_program(fused)
    packed, tasks, library, handle = _build_kernels(program, target, schedules,
                                                    default_schedule)
    natives, models = _native_functions(fused, program, target, schedules, default_schedule)
    codes = [_Code(f) for f in program.functions]
    for code in codes:
        _link_function(code, codes, program, packed, natives)
    return VMExecutable(program, fused, target, tasks, library,
                        time.perf_counter() - start, codes, handle, models)


# ------------------------------------------------------------------------------ arguments


def _convert(value: object, t: Type | None, where: str) -> object:
    """A Python argument as a VM value: tensors from numbers and lists (in the annotated
    dtype), tuples of them; other values as they are (checked by ``_check``)."""
    if isinstance(t, TupleType) and type(value) in (tuple, list):
        items = list(value)
        if len(items) != len(t.fields):
            raise VMError(f"{where} must be a tuple of {len(t.fields)} fields, got "
                          f"{len(items)}")
        return tuple(_convert(v, f, f"{where}.{i}")
                     for i, (v, f) in enumerate(zip(items, t.fields, strict=True)))
    if isinstance(t, TensorType) and isinstance(value, np.ndarray):
        # kernels read arrays in place: a read-only or non-contiguous one is copied once
        return np.require(value, requirements=("C", "W"))
    if isinstance(t, TensorType) and not isinstance(value, ADTValue | VMClosure | RefValue
                                                    | tuple):
        try:
            return np.asarray(value, dtype=t.dtype)
        except (TypeError, ValueError) as exc:
            raise VMError(f"{where} is not a tensor of {t}: {exc}") from None
    return value


def _check(value: object, t: Type | None, module: Module, where: str) -> None:
    """Check ``value`` against type ``t`` in depth (iteratively: long lists are fine)."""
    field_types: dict[tuple[int, str], tuple[Type, ...]] = {}
    stack = [(value, t, where)]
    while stack:
        v, ty, at = stack.pop()
        if isinstance(ty, TensorType):
            if not isinstance(v, np.ndarray | np.generic):  # (a numpy scalar is 0-d)
                raise VMError(f"{at} must be a tensor of {ty} (a numpy array), got "
                              f"{type(v).__name__}")
            if str(v.dtype) != ty.dtype or v.ndim != len(ty.shape) or any(
                    isinstance(d, int) and d != s for d, s in zip(ty.shape, v.shape,
                                                                  strict=True)):
                raise VMError(f"{at} is a {v.dtype} tensor of shape {tuple(v.shape)}, "
                              f"expected {ty}")
        elif isinstance(ty, TupleType):
            if type(v) is not tuple or len(v) != len(ty.fields):
                raise VMError(f"{at} must be a tuple of {len(ty.fields)} fields")
            stack.extend((f, ft, f"{at}.{i}") for i, (f, ft) in
                         enumerate(zip(v, ty.fields, strict=True)))
        elif isinstance(ty, TypeCall | GlobalTypeVar):
            header, args = (ty.func, ty.args) if isinstance(ty, TypeCall) else (ty, ())
            data = module.type_definitions.get(header)
            if not isinstance(v, ADTValue) or not isinstance(data, TypeData):
                raise VMError(f"{at} must be a value of type {ty}, got {type(v).__name__}")
            con = next((c for c in data.constructors if c.name == v.name), None)
            if con is None or con.tag != v.constructor.tag or len(v.fields) != len(
                    con.inputs):
                raise VMError(f"{at}: {v.name} is not a constructor of {ty}")
            key = (id(ty), con.name)
            if key not in field_types:
                mapping = dict(zip(data.type_vars, args, strict=False))
                field_types[key] = tuple(substitute(i, mapping) for i in con.inputs)
            stack.extend((f, ft, f"{at}.{con.name}[{i}]") for i, (f, ft) in
                         enumerate(zip(v.fields, field_types[key], strict=True)))
        elif isinstance(ty, FuncType):
            if not isinstance(v, VMClosure):
                raise VMError(f"{at} must be a function made by the VM (a VMClosure), got "
                              f"{type(v).__name__}")
        elif isinstance(ty, RefType):
            if not isinstance(v, RefValue):
                raise VMError(f"{at} must be a reference (RefValue)")
            stack.append((v.value, ty.value, f"{at}.value"))


def _bind(fn: VMFunction, args: Sequence[object], kwargs: Mapping[str, object],
          module: Module) -> list[object]:
    """The arguments of a call from Python, by position then by parameter name, converted
    and checked against the parameter types."""
    where = f"@{fn.name}"
    if len(args) > fn.num_params:
        raise VMError(f"{where} takes {fn.num_params} arguments "
                      f"({', '.join('%' + p for p in fn.params)}), got {len(args)}")
    values: list[object] = list(args)
    for name in fn.params[len(args):]:
        if name not in kwargs:
            raise VMError(f"{where}: missing argument %{name} (parameters: "
                          f"{', '.join('%' + p for p in fn.params)})")
        values.append(kwargs[name])
    extra = set(kwargs) - set(fn.params[len(args):])
    if extra:
        raise VMError(f"{where}: unexpected argument(s) {', '.join(sorted(extra))}")
    out = []
    for name, value, t in zip(fn.params, values, fn.param_types, strict=True):
        value = _convert(value, t, f"{where} argument %{name}")
        _check(value, t, module, f"{where} argument %{name}")
        out.append(value)
    return out


# ------------------------------------------------------------------------------ the VM


class VirtualMachine:
    """Runs a ``VMExecutable``: ``vm(*args, **kwargs)`` calls ``@main``."""

    def __init__(self, executable: VMExecutable):
        self.executable = executable
        self.stats = VMStats()

    def run(self, *args: object, **kwargs: object) -> object:
        """``@main``'s value on these arguments."""
        return self.invoke("main", *args, **kwargs)

    __call__ = run

    def invoke(self, name: str, *args: object, **kwargs: object) -> object:
        """The value of global function ``name`` on these arguments."""
        index = self.executable.program.globals.get(name)
        if index is None:
            raise VMError(f"the program has no global function @{name}")
        code = self.executable.codes[index]
        values = _bind(code.function, args, kwargs, self.executable.module)
        return self._execute(code, [*values, *code.padding])

    def _execute(self, fn: _Code, regs: list) -> object:
        """Run ``fn`` on its filled frame to its return value: the interpreter loop."""
        (MOVE, LOAD_CONST, ALLOC_TUPLE, GET_FIELD, ALLOC_ADT, GET_ADT_FIELD, CHECK_TAG,
         JUMP_UNLESS, GOTO, INVOKE, TAIL_INVOKE, MAKE_CLOSURE, INVOKE_CLOSURE, INVOKE_PACKED,
         REF_NEW, REF_READ, REF_WRITE, RET, FAIL, TAIL_INVOKE_CLOSURE) = (int(op) for op in Opcode)
        FALLBACK, SCALAR, NATIVE = _FALLBACK, _SCALAR, _NATIVE
        code, pc = fn.code, 0
        stack: list[tuple] = []
        executed = kernels = fallbacks = scalars = natives = 0
        try:
            while True:
                ins = code[pc]
                pc += 1
                executed += 1
                op = ins[0]
                if op == INVOKE_PACKED:
                    regs[ins[1]] = ins[2](regs, ins[3])
                    kernels += 1
                elif op == GET_FIELD:
                    regs[ins[1]] = regs[ins[2]][ins[3]]
                elif op == SCALAR:
                    regs[ins[1]] = ins[2](regs, ins[3])
                    scalars += 1
                elif op == NATIVE:
                    regs[ins[1]] = ins[2](regs, ins[3])
                    natives += 1
                elif op == INVOKE:
                    callee = ins[2]
                    new = [regs[a] for a in ins[3]]
                    new += callee.padding
                    stack.append((fn, code, pc, regs, ins[1]))
                    fn, code, pc, regs = callee, callee.code, 0, new
                elif op == RET:
                    value = regs[ins[1]]
                    if not stack:
                        return value
                    fn, code, pc, regs, dst = stack.pop()
                    regs[dst] = value
                elif op == LOAD_CONST:
                    regs[ins[1]] = ins[2]
                elif op == JUMP_UNLESS:
                    if not regs[ins[1]]:
                        pc = ins[2]
                elif op == CHECK_TAG:
                    if regs[ins[1]].constructor.tag != ins[2]:
                        pc = ins[3]
                elif op == GET_ADT_FIELD:
                    regs[ins[1]] = regs[ins[2]][1][ins[3]]
                elif op == ALLOC_ADT:
                    regs[ins[1]] = ADTValue(ins[2], [regs[a] for a in ins[3]])
                elif op == ALLOC_TUPLE:
                    regs[ins[1]] = tuple([regs[a] for a in ins[2]])
                elif op == MOVE:
                    regs[ins[1]] = regs[ins[2]]
                elif op == GOTO:
                    pc = ins[1]
                elif op == INVOKE_CLOSURE:
                    closure = regs[ins[2]]
                    callee = closure.code
                    new = [*closure.captured, *[regs[a] for a in ins[3]]]
                    new += callee.padding
                    if callee.self_register is not None:
                        new[callee.self_register] = closure
                    stack.append((fn, code, pc, regs, ins[1]))
                    fn, code, pc, regs = callee, callee.code, 0, new
                elif op == TAIL_INVOKE_CLOSURE:
                    closure = regs[ins[1]]
                    callee = closure.code
                    new = [*closure.captured, *[regs[a] for a in ins[2]]]
                    new += callee.padding
                    if callee.self_register is not None:
                        new[callee.self_register] = closure
                    fn, code, pc, regs = callee, callee.code, 0, new
                elif op == TAIL_INVOKE:
                    callee = ins[1]
                    new = [regs[a] for a in ins[2]]
                    new += callee.padding
                    fn, code, pc, regs = callee, callee.code, 0, new
                elif op == MAKE_CLOSURE:
                    regs[ins[1]] = VMClosure(ins[2], tuple([regs[a] for a in ins[3]]), self)
                elif op == FALLBACK:
                    regs[ins[1]] = ins[2](regs, ins[3])
                    fallbacks += 1
                elif op == REF_NEW:
                    regs[ins[1]] = RefValue(regs[ins[2]])
                elif op == REF_READ:
                    regs[ins[1]] = regs[ins[2]].value
                elif op == REF_WRITE:
                    regs[ins[2]].value = regs[ins[3]]
                    regs[ins[1]] = ()
                elif op == FAIL:
                    raise VMError(ins[1])
                else:
                    raise VMError(f"unknown opcode {op}")
        except Exception as exc:
            raise self._locate(exc, fn, pc - 1) from exc
        finally:
            self.stats.instructions += executed
            self.stats.kernel_calls += kernels
            self.stats.fallback_calls += fallbacks
            self.stats.scalar_calls += scalars
            self.stats.native_calls += natives

    def _locate(self, exc: Exception, fn: _Code, pc: int) -> VMError:
        """``exc`` as a ``VMError`` naming the function and instruction it happened at."""
        text = fn.function.instructions[pc].text(self.executable.program)
        message = str(exc) if isinstance(exc, VMError) else f"{type(exc).__name__}: {exc}"
        return VMError(f"{message} (in @{fn.name}, instruction {pc}: {text})")
