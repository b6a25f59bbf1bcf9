"""The virtual machine's bytecode compiler: from a fused, type-checked ``Module`` to a
``Program`` of register-based VM functions (``ir.backend.vm`` builds the kernels and runs
the program).

Each global function becomes one ``VMFunction``; each closure (a ``Function`` expression
that is not ``Primitive``) becomes another. Every value a function computes gets its own
register (``r0, r1, ...``: a closure's captured variables first, then the parameters); a
``let`` or a pattern variable only names the register of its value, so binding costs
nothing. Instructions (one dataclass each, ``Opcode`` numbers them):

- data: ``Move``, ``LoadConst``, ``AllocTuple``, ``GetField`` (a tuple's field),
  ``AllocADT`` (a constructor and its fields), ``GetADTField``, ``RefNew`` / ``RefLoad``
  / ``RefStore``;
- control: ``JumpUnless`` (jump unless the scalar condition holds), ``Goto``,
  ``CheckTag`` (jump unless an ADT value has a constructor's tag: one test of a match),
  ``Fail`` (no clause matched), ``Ret``;
- calls: ``Invoke`` (a global function), ``MakeClosure`` / ``InvokeClosure``, their tail
  forms ``TailInvoke`` / ``TailInvokeClosure`` (a call in tail position: the callee
  replaces the caller's frame, so tail-recursive loops run in constant space), and
  ``InvokePacked`` (a fused ``Primitive`` function: a compiled kernel, or the operators'
  numpy computes).

Evaluation follows the reference interpreter: call by value, arguments left to right (a
closure call evaluates its callee first), and within one invocation a call, tuple or
projection shared in the dataflow graph is computed once — in the branch of an ``if`` or
the clause of a ``match`` where it is first needed; one needed again in a sibling branch
is computed there again (a register written on one path is never read on another).
Reference operations, ``let``/``if``/``match`` and functions are compiled where they occur,
as the interpreter evaluates them. A match tests its clauses in order, each pattern
(constructor, tuple, variable, wildcard; nested) by ``CheckTag`` and field loads; a
``let``-bound function that calls itself finds its own closure in a register on entry
(``VMFunction.self_register``).

A constructor with fields used as a value (``@map(Some, %l)``) becomes the closure of a
function that builds the ADT value. Not supported (``VMCompileError``): an operator call
outside a fused function (FuseOps wraps every one), an operator used as a value, a
``Primitive`` function used as a value.

``Program.disassemble()`` prints the functions, one instruction a line, then the fused
functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import ClassVar

import numpy as np

from ..expr import (
    Call,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Op,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ..module import Module
from ..types import Type
from ..vars import free_vars

__all__ = ["AllocADT", "AllocTuple", "CheckTag", "Fail", "GetADTField", "GetField", "Goto",
           "Instruction", "Invoke", "InvokeClosure", "InvokePacked", "JumpUnless", "LoadConst",
           "MakeClosure", "Move", "Opcode", "PackedFunction", "Program", "RefLoad",
           "RefNew", "RefStore", "Ret", "TailInvoke", "TailInvokeClosure", "VMCompileError",
           "VMFunction", "compile_program"]


class VMCompileError(ValueError):
    """The program uses something the VM does not support (the message says what)."""


class Opcode(IntEnum):
    """Instruction numbers, the VM's dispatch keys."""

    MOVE = 0
    LOAD_CONST = 1
    ALLOC_TUPLE = 2
    GET_FIELD = 3
    ALLOC_ADT = 4
    GET_ADT_FIELD = 5
    CHECK_TAG = 6
    JUMP_UNLESS = 7
    GOTO = 8
    INVOKE = 9
    TAIL_INVOKE = 10
    MAKE_CLOSURE = 11
    INVOKE_CLOSURE = 12
    INVOKE_PACKED = 13
    REF_NEW = 14
    REF_READ = 15
    REF_WRITE = 16
    RET = 17
    FAIL = 18
    TAIL_INVOKE_CLOSURE = 19


Regs = tuple[int, ...]


def _regs(rs: Regs) -> str:
    return ", ".join(f"r{r}" for r in rs)


class Instruction:
    """Base of instructions: ``opcode`` and the operands (the dataclass fields, in order;
    ``operands()`` gives them as the VM encodes them)."""

    opcode: ClassVar[Opcode]
    __slots__ = ()

    def operands(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self))

    def text(self, program: Program) -> str:
        """The instruction in the disassembly."""
        raise NotImplementedError


@dataclass(slots=True)
class Move(Instruction):
    opcode = Opcode.MOVE
    dst: int
    src: int

    def text(self, program: Program) -> str:
        return f"r{self.dst} = r{self.src}"


@dataclass(slots=True)
class LoadConst(Instruction):
    opcode = Opcode.LOAD_CONST
    dst: int
    index: int

    def text(self, program: Program) -> str:
        return f"r{self.dst} = const #{self.index}  ; {_describe(program.constants[self.index])}"


@dataclass(slots=True)
class AllocTuple(Instruction):
    opcode = Opcode.ALLOC_TUPLE
    dst: int
    fields: Regs

    def text(self, program: Program) -> str:
        return f"r{self.dst} = tuple({_regs(self.fields)})"


@dataclass(slots=True)
class GetField(Instruction):
    opcode = Opcode.GET_FIELD
    dst: int
    src: int
    index: int

    def text(self, program: Program) -> str:
        return f"r{self.dst} = r{self.src}.{self.index}"


@dataclass(slots=True)
class AllocADT(Instruction):
    opcode = Opcode.ALLOC_ADT
    dst: int
    constructor: Constructor
    fields: Regs

    def text(self, program: Program) -> str:
        return (f"r{self.dst} = alloc_adt {self.constructor.name}#{self.constructor.tag}"
                f"({_regs(self.fields)})")


@dataclass(slots=True)
class GetADTField(Instruction):
    opcode = Opcode.GET_ADT_FIELD
    dst: int
    src: int
    index: int

    def text(self, program: Program) -> str:
        return f"r{self.dst} = adt_field r{self.src}, {self.index}"


@dataclass(slots=True)
class CheckTag(Instruction):
    opcode = Opcode.CHECK_TAG
    src: int
    tag: int
    target: int  # where to go when the tag differs
    name: str  # the constructor's (for the disassembly)

    def text(self, program: Program) -> str:
        return f"check_tag r{self.src} is {self.name}#{self.tag} else goto {self.target}"


@dataclass(slots=True)
class JumpUnless(Instruction):
    opcode = Opcode.JUMP_UNLESS
    cond: int
    target: int  # where to go when the condition is false

    def text(self, program: Program) -> str:
        return f"if r{self.cond} else goto {self.target}"


@dataclass(slots=True)
class Goto(Instruction):
    opcode = Opcode.GOTO
    target: int

    def text(self, program: Program) -> str:
        return f"goto {self.target}"


@dataclass(slots=True)
class Invoke(Instruction):
    opcode = Opcode.INVOKE
    dst: int
    func: int
    args: Regs

    def text(self, program: Program) -> str:
        return f"r{self.dst} = invoke @{program.functions[self.func].name}({_regs(self.args)})"


@dataclass(slots=True)
class TailInvoke(Instruction):
    opcode = Opcode.TAIL_INVOKE
    func: int
    args: Regs

    def text(self, program: Program) -> str:
        return f"tail_invoke @{program.functions[self.func].name}({_regs(self.args)})"


@dataclass(slots=True)
class MakeClosure(Instruction):
    opcode = Opcode.MAKE_CLOSURE
    dst: int
    func: int
    captured: Regs

    def text(self, program: Program) -> str:
        return (f"r{self.dst} = make_closure @{program.functions[self.func].name}"
                f"[{_regs(self.captured)}]")


@dataclass(slots=True)
class InvokeClosure(Instruction):
    opcode = Opcode.INVOKE_CLOSURE
    dst: int
    closure: int
    args: Regs

    def text(self, program: Program) -> str:
        return f"r{self.dst} = invoke_closure r{self.closure}({_regs(self.args)})"


@dataclass(slots=True)
class TailInvokeClosure(Instruction):
    opcode = Opcode.TAIL_INVOKE_CLOSURE
    closure: int
    args: Regs

    def text(self, program: Program) -> str:
        return f"tail_invoke_closure r{self.closure}({_regs(self.args)})"


@dataclass(slots=True)
class InvokePacked(Instruction):
    opcode = Opcode.INVOKE_PACKED
    dst: int
    packed: int
    args: Regs  # one per parameter of the primitive function, in order

    def text(self, program: Program) -> str:
        name = program.packed[self.packed].name
        return f"r{self.dst} = invoke_packed ${self.packed} {name}({_regs(self.args)})"


@dataclass(slots=True)
class RefNew(Instruction):
    opcode = Opcode.REF_NEW
    dst: int
    src: int

    def text(self, program: Program) -> str:
        return f"r{self.dst} = ref_new r{self.src}"


@dataclass(slots=True)
class RefLoad(Instruction):
    opcode = Opcode.REF_READ
    dst: int
    ref: int

    def text(self, program: Program) -> str:
        return f"r{self.dst} = ref_read r{self.ref}"


@dataclass(slots=True)
class RefStore(Instruction):
    opcode = Opcode.REF_WRITE
    dst: int  # receives the unit value ()
    ref: int
    src: int

    def text(self, program: Program) -> str:
        return f"r{self.dst} = ref_write r{self.ref}, r{self.src}"


@dataclass(slots=True)
class Ret(Instruction):
    opcode = Opcode.RET
    src: int

    def text(self, program: Program) -> str:
        return f"ret r{self.src}"


@dataclass(slots=True)
class Fail(Instruction):
    opcode = Opcode.FAIL
    message: str

    def text(self, program: Program) -> str:
        return f"fail {self.message!r}"


@dataclass
class VMFunction:
    """One function of the program. Its frame has ``num_registers`` registers: the
    captured variables (closures only) first, then the parameters."""

    name: str
    params: list[str]
    #: the parameters' types (checked, else annotated; None when neither is known)
    param_types: list[Type | None] = field(default_factory=list)
    num_captured: int = 0
    num_registers: int = 0
    instructions: list[Instruction] = field(default_factory=list)
    #: the register that receives the closure itself on entry (a let-bound recursive
    #: function), or None
    self_register: int | None = None

    @property
    def num_params(self) -> int:
        return len(self.params)


@dataclass
class PackedFunction:
    """A fused ``Primitive`` function called by ``InvokePacked``."""

    name: str
    function: Function


@dataclass
class Program:
    """The compiled module: functions (globals first, then closures), the constants and
    the fused functions the instructions refer to by index."""

    functions: list[VMFunction] = field(default_factory=list)
    globals: dict[str, int] = field(default_factory=dict)
    constants: list[np.ndarray] = field(default_factory=list)
    packed: list[PackedFunction] = field(default_factory=list)

    def disassemble(self) -> str:
        """A readable listing of every function, its registers and instructions."""
        lines: list[str] = []
        for fn in self.functions:
            captured = (f" captures {_regs(tuple(range(fn.num_captured)))}"
                        if fn.num_captured else "")
            first = fn.num_captured
            params = ", ".join(f"%{p}: r{first + i}" for i, p in enumerate(fn.params))
            itself = (f", itself in r{fn.self_register}" if fn.self_register is not None
                      else "")
            lines.append(f"@{fn.name}({params}){captured}{itself}, "
                         f"{fn.num_registers} registers:")
            lines.extend(f"  {pc:4d}: {ins.text(self)}" for pc, ins in
                         enumerate(fn.instructions))
            lines.append("")
        for i, p in enumerate(self.packed):
            params = ", ".join(str(v.checked_type) for v in p.function.params)
            lines.append(f"${i} {p.name}({params}) -> {p.function.body.checked_type}")
        return "\n".join(lines).rstrip() + "\n"


def _describe(value: np.ndarray) -> str:
    if value.size <= 4:
        return f"{value.dtype} {value.tolist()!r}"
    return f"{value.dtype}{list(value.shape)}"


# ------------------------------------------------------------------------------ compiler


class _ModuleCompiler:
    """Compiles every global function; collects closures, constants and fused functions."""

    def __init__(self, module: Module):
        self.module = module
        self.program = Program()
        self.globals: dict[str, int] = {}
        self._constants: dict[int, int] = {}  # id(Constant) -> index
        self._packed: dict[int, int] = {}  # id(primitive Function) -> index
        self._constructors: dict[str, int] = {}  # constructor name -> its function

    def run(self) -> Program:
        work = [(gv, f) for gv, f in self.module.functions.items()
                if not f.attrs.get("Primitive")]
        for gv, func in work:
            self.globals[gv.name] = self.new_function(gv.name, func.params)
        for gv, func in work:
            _FunctionCompiler(self, self.globals[gv.name], [], func.params, None).body(
                func.body)
        self.program.globals = dict(self.globals)
        return self.program

    def new_function(self, name: str, params: list[Var]) -> int:
        types = [p.checked_type_or_none or p.type_annotation for p in params]
        self.program.functions.append(VMFunction(name, [p.name_hint for p in params], types))
        return len(self.program.functions) - 1

    def constant(self, c: Constant) -> int:
        index = self._constants.get(id(c))
        if index is None:
            self.program.constants.append(c.data)  # (read-only and C-contiguous)
            index = self._constants[id(c)] = len(self.program.constants) - 1
        return index

    def constructor_function(self, con: Constructor) -> int:
        """The VM function ``fn (fields...) { con(fields...) }`` (made once)."""
        index = self._constructors.get(con.name)
        if index is None:
            n = len(con.inputs)
            self.program.functions.append(VMFunction(
                con.name, [f"field{i}" for i in range(n)], [None] * n, num_registers=n + 1,
                instructions=[AllocADT(n, con, tuple(range(n))), Ret(n)]))
            index = self._constructors[con.name] = len(self.program.functions) - 1
        return index

    def packed(self, func: Function) -> int:
        index = self._packed.get(id(func))
        if index is None:
            from .lower import workload_name

            self.program.packed.append(PackedFunction(workload_name(func), func))
            index = self._packed[id(func)] = len(self.program.packed) - 1
        return index


def _irrefutable(p: Pattern) -> bool:
    stack = [p]
    while stack:
        q = stack.pop()
        if isinstance(q, PatternConstructor):
            return False
        if isinstance(q, PatternTuple):
            stack.extend(q.patterns)
    return True


def _pattern_text(p: Pattern) -> str:
    if isinstance(p, PatternWildcard):
        return "_"
    if isinstance(p, PatternVar):
        return "%" + p.var.name_hint
    if isinstance(p, PatternConstructor):
        inner = ", ".join(_pattern_text(q) for q in p.patterns)
        return f"{p.constructor.name}({inner})" if p.patterns else p.constructor.name
    return "(" + ", ".join(_pattern_text(q) for q in p.patterns) + ")"


#: nodes compiled after their operands
_WITH_OPERANDS = (Call, Tuple, TupleGetItem, RefCreate, RefRead, RefWrite)
#: nodes computed once per invocation when shared (as in the interpreter), and the atoms
_MEMOISED = (Call, Tuple, TupleGetItem, Constant, GlobalVar, Constructor)


class _FunctionCompiler:
    """Compiles one function body into ``program.functions[index]``."""

    def __init__(self, mc: _ModuleCompiler, index: int, captured: list[Var],
                 params: list[Var], self_var: Var | None):
        self.mc = mc
        self.fn = mc.program.functions[index]
        self.code = self.fn.instructions
        self.env: dict[Var, int] = {}
        self.num_registers = 0
        for v in (*captured, *params):
            self.env[v] = self.new_register()
        self.fn.num_captured = len(captured)
        if self_var is not None:
            self.env[self_var] = self.fn.self_register = self.new_register()
        #: the values computed so far on the current path: one dict per enclosing branch
        self.scopes: list[dict[int, int]] = [{}]
        self.closures = 0

    # ------------------------------------------------------------------ helpers

    def new_register(self) -> int:
        self.num_registers += 1
        return self.num_registers - 1

    def emit(self, ins: Instruction) -> Instruction:
        self.code.append(ins)
        return ins

    def lookup(self, e: Expr) -> int | None:
        if type(e) is Var:
            try:
                return self.env[e]
            except KeyError:
                raise VMCompileError(f"@{self.fn.name}: variable %{e.name_hint} is not "
                                     "bound") from None
        key = id(e)
        for scope in reversed(self.scopes):
            reg = scope.get(key)
            if reg is not None:
                return reg
        return None

    def remember(self, e: Expr, reg: int) -> None:
        self.scopes[-1][id(e)] = reg

    def in_branch(self, e: Expr) -> int:
        """The register of ``e`` compiled in a scope of its own (an if branch, a clause)."""
        self.scopes.append({})
        try:
            return self.compile(e)
        finally:
            self.scopes.pop()

    # ------------------------------------------------------------------ bodies

    def body(self, e: Expr) -> None:
        """Compile a function body: its value is returned."""
        self.tail(e)
        self.fn.num_registers = self.num_registers

    def tail(self, e: Expr) -> None:
        """Compile ``e`` in tail position: every path ends with ``Ret`` or ``TailInvoke``."""
        e = self.let_chain(e)
        if self.lookup(e) is not None:
            self.emit(Ret(self.compile(e)))
        elif type(e) is If:
            jump = self.emit(JumpUnless(self.compile(e.cond), -1))
            self.branch_tail(e.true_branch)
            jump.target = len(self.code)
            self.branch_tail(e.false_branch)
        elif type(e) is Match:
            self.match(e, None)
        elif type(e) is Call and type(e.op) is GlobalVar:
            func = self.global_index(e.op, len(e.args))
            self.emit(TailInvoke(func, tuple(self.compile(a) for a in e.args)))
        elif type(e) is Call and self.calls_closure(e):
            closure = self.compile(e.op)
            self.emit(TailInvokeClosure(closure, tuple(self.compile(a) for a in e.args)))
        else:
            self.emit(Ret(self.compile(e)))

    def branch_tail(self, e: Expr) -> None:
        self.scopes.append({})
        try:
            self.tail(e)
        finally:
            self.scopes.pop()

    def let_chain(self, e: Expr) -> Expr:
        """Bind the lets at the head of ``e`` (a loop: long chains do not recurse); the
        first expression that is not a let."""
        while type(e) is Let:
            value = e.value
            if type(value) is Function and not value.attrs.get("Primitive"):
                self.env[e.var] = self.closure(value, e.var)
            else:
                self.env[e.var] = self.compile(value)
            e = e.body
        return e

    # ------------------------------------------------------------------ expressions

    def compile(self, root: Expr) -> int:
        """The register holding ``root``'s value, emitting the code computing it. Dataflow
        nodes and references are compiled with an explicit stack (operands first, left to
        right; each operand's register on ``values``), so deep dataflow does not recurse."""
        values: list[int] = []
        stack: list[tuple[Expr, list[Expr] | None]] = [(root, None)]
        while stack:
            e, operands = stack.pop()
            if operands is None:
                reg = self.lookup(e)
                if reg is not None:
                    values.append(reg)
                    continue
                if isinstance(e, _WITH_OPERANDS):
                    operands = self.operands(e)
                    stack.append((e, operands))
                    stack.extend((c, None) for c in reversed(operands))
                    continue
            regs = tuple(values[len(values) - len(operands or ()):])
            del values[len(values) - len(regs):]
            reg = self.node(e, regs)
            if isinstance(e, _MEMOISED):
                self.remember(e, reg)
            values.append(reg)
        return values[0]

    @staticmethod
    def operands(e: Expr) -> list[Expr]:
        if type(e) is Call:
            return [e.op, *e.args] if _FunctionCompiler.calls_closure(e) else list(e.args)
        if type(e) is Tuple:
            return list(e.fields)
        if type(e) is TupleGetItem:
            return [e.tuple_value]
        if type(e) is RefCreate:
            return [e.value]
        if type(e) is RefRead:
            return [e.ref]
        return [e.ref, e.value]  # RefWrite

    def node(self, e: Expr, regs: tuple[int, ...]) -> int:
        """Emit the code of one node, given the registers of its operands; its register."""
        kind = type(e)
        if kind is Call:
            return self.call(e, regs)
        if kind is Tuple:
            return self.emit_new(AllocTuple, regs)
        if kind is TupleGetItem:
            return self.emit_new(GetField, regs[0], e.index)
        if kind is RefCreate:
            return self.emit_new(RefNew, regs[0])
        if kind is RefRead:
            return self.emit_new(RefLoad, regs[0])
        if kind is RefWrite:
            return self.emit_new(RefStore, *regs)
        if kind is Constant:
            return self.emit_new(LoadConst, self.mc.constant(e))
        if kind is GlobalVar:
            return self.emit_new(MakeClosure, self.global_index(e, None), ())
        if kind is Constructor:
            if e.inputs:  # a function value building the ADT value
                return self.emit_new(MakeClosure, self.mc.constructor_function(e), ())
            return self.emit_new(AllocADT, e, ())
        if kind is Function:
            if e.attrs.get("Primitive"):
                raise VMCompileError(f"@{self.fn.name}: a fused (Primitive) function used "
                                     "as a value")
            return self.closure(e, None)
        if kind is Let:
            return self.compile(self.let_chain(e))
        if kind is If:
            return self.if_(e)
        if kind is Match:
            return self.match(e, self.new_register())
        if kind is Op:
            raise VMCompileError(f"@{self.fn.name}: operator {e.name} used as a value")
        raise VMCompileError(f"@{self.fn.name}: cannot compile a {kind.__name__}")

    def emit_new(self, kind: type[Instruction], *operands: object) -> int:
        """Emit ``kind(dst, *operands)`` with a new register ``dst``; returns ``dst``."""
        dst = self.new_register()
        self.emit(kind(dst, *operands))
        return dst

    def call(self, e: Call, regs: tuple[int, ...]) -> int:
        op = e.op
        if type(op) is Op:
            raise VMCompileError(f"@{self.fn.name}: a call of operator {op.name} outside a "
                                 "fused function (run the module through FuseOps)")
        if type(op) is Constructor:
            if len(e.args) != len(op.inputs):
                raise VMCompileError(f"constructor {op.name} takes {len(op.inputs)} fields, "
                                     f"got {len(e.args)}")
            return self.emit_new(AllocADT, op, regs)
        if type(op) is GlobalVar:
            return self.emit_new(Invoke, self.global_index(op, len(e.args)), regs)
        if type(op) is Function and op.attrs.get("Primitive"):
            if len(e.args) != len(op.params):
                raise VMCompileError(f"a fused function of {len(op.params)} parameters "
                                     f"called with {len(e.args)} arguments")
            return self.emit_new(InvokePacked, self.mc.packed(op), regs)
        return self.emit_new(InvokeClosure, regs[0], regs[1:])

    @staticmethod
    def calls_closure(e: Call) -> bool:
        """Whether ``e`` calls a function value (not a global, constructor, operator or
        fused function)."""
        return not (type(e.op) in (GlobalVar, Constructor, Op) or (
            type(e.op) is Function and e.op.attrs.get("Primitive")))

    def global_index(self, gv: GlobalVar, num_args: int | None) -> int:
        index = self.mc.globals.get(gv.name)
        if index is None:
            raise VMCompileError(f"@{self.fn.name} refers to @{gv.name}, which is not a "
                                 "function of the module")
        want = self.mc.program.functions[index].num_params
        if num_args is not None and num_args != want:
            raise VMCompileError(f"@{self.fn.name} calls @{gv.name} with {num_args} "
                                 f"arguments, it takes {want}")
        return index

    def closure(self, func: Function, self_var: Var | None) -> int:
        """Compile ``func`` as a new VM function; emit the ``MakeClosure``."""
        free = free_vars(func)
        captured = [v for v in free if v is not self_var]
        regs = tuple(self.compile(v) for v in captured)
        if self_var is not None and self_var not in free:
            self_var = None
        label = self_var.name_hint if self_var is not None else "fn"
        self.closures += 1
        index = self.mc.new_function(f"{self.fn.name}.{label}{self.closures}", func.params)
        _FunctionCompiler(self.mc, index, captured, func.params, self_var).body(func.body)
        return self.emit_new(MakeClosure, index, regs)

    def if_(self, e: If) -> int:
        dst = self.new_register()
        jump = self.emit(JumpUnless(self.compile(e.cond), -1))
        self.emit(Move(dst, self.in_branch(e.true_branch)))
        done = self.emit(Goto(-1))
        jump.target = len(self.code)
        self.emit(Move(dst, self.in_branch(e.false_branch)))
        done.target = len(self.code)
        return dst

    def match(self, e: Match, dst: int | None) -> int:
        """The clauses in order; each one's value goes to ``dst`` (then to the end), or is
        returned in tail position (``dst`` None)."""
        data = self.compile(e.data)
        ends: list[Goto] = []
        refutable = True
        for clause in e.clauses:
            self.scopes.append({})
            try:
                fails = self.pattern(clause.lhs, data)
                if dst is None:
                    self.tail(clause.rhs)
                else:
                    self.emit(Move(dst, self.compile(clause.rhs)))
                    ends.append(self.emit(Goto(-1)))
            finally:
                self.scopes.pop()
            for jump in fails:
                jump.target = len(self.code)
            if _irrefutable(clause.lhs):
                refutable = False
                break
        if refutable:
            names = ", ".join(_pattern_text(c.lhs) for c in e.clauses) or "no clauses"
            self.emit(Fail(f"match: no clause matches (clauses: {names})"))
        for jump in ends:
            jump.target = len(self.code)
        return -1 if dst is None else dst

    def pattern(self, p: Pattern, reg: int) -> list[CheckTag]:
        """Emit the tests and loads of ``p`` against the value in ``reg``; binds its
        variables; the jumps to patch to the next clause."""
        fails: list[CheckTag] = []
        stack = [(p, reg)]
        while stack:
            q, r = stack.pop()
            if isinstance(q, PatternVar):
                self.env[q.var] = r
            elif isinstance(q, PatternConstructor):
                con = q.constructor
                fails.append(self.emit(CheckTag(r, con.tag, -1, con.name)))
                stack.extend(reversed(self.fields(GetADTField, q.patterns, r)))
            elif isinstance(q, PatternTuple):
                stack.extend(reversed(self.fields(GetField, q.patterns, r)))
        return fails

    def fields(self, load: type[Instruction], patterns: tuple[Pattern, ...], reg: int
               ) -> list[tuple[Pattern, int]]:
        """Load the fields that ``patterns`` look into; (pattern, register) pairs."""
        return [(sub, self.emit_new(load, reg, i)) for i, sub in enumerate(patterns)
                if not isinstance(sub, PatternWildcard)]


def compile_program(module: Module) -> Program:
    """The VM program of a fused, type-checked module (see the module docstring)."""
    return _ModuleCompiler(module).run()
