"""The constraint solver behind type inference: unification of types with union-find over
``IncompleteType`` holes, and deferred constraints (operator type relations, tuple
projections) solved to a fixed point.

- ``unify(a, b)`` makes two types equal, binding holes (with an occurs check); it raises
  ``Mismatch`` saying where they differ (``field 0: dimension 1: 10 vs 5``). Tensor shapes
  unify dimension by dimension: equal ints, equal symbolic dims (``SymDim`` by name), or
  ``Any`` against anything (the unified dimension is then ``Any``). Function types unify up
  to renaming of their type parameters; type variables are rigid (equal only to
  themselves).
- A ``Constraint`` waits until the holes it needs are bound (it watches one hole at a
  time, and is woken when that hole is bound), then computes its output type, which is
  unified with its output hole. ``add`` tries a constraint at once; ``drain`` retries the
  woken ones until nothing is left to do; ``unsolved`` lists those still waiting.
- ``resolve(t)`` is ``t`` with every bound hole replaced by its binding (path-compressed).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..attrs import Attrs
from ..errors import IRTypeError
from ..expr import Op
from ..op_registry import OpDef
from ..span import Span
from ..types import (
    Any,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeRelation,
    TypeVar,
    substitute,
    walk_type,
)


class Mismatch(Exception):
    """Two types do not unify. ``detail`` says where (``field 1: dimension 0: 3 vs 4``);
    ``top``: the two types given to ``unify`` differ in kind (the detail would only repeat
    them)."""

    def __init__(self, detail: str, top: bool = False):
        super().__init__(detail)
        self.detail = detail
        self.top = top

    def inside(self, where: str) -> Mismatch:
        return Mismatch(f"{where}: {self.detail}")

    def explain(self) -> str:
        """`` (detail)`` to append to a message, or "" when it would say nothing new."""
        return "" if self.top else f" ({self.detail})"


def locate(err: IRTypeError, span: Span | None, where: str | None) -> IRTypeError:
    """``err`` at ``span``; when no position is known, its message names the global it
    comes from (``... (in @main)``)."""
    err = err.with_span(span)
    if err.span is None and where and getattr(err, "where", None) is None:
        located = IRTypeError(f"{err.message} (in {where})")
        located.where = where
        located.__cause__ = err.__cause__
        return located
    return err


class Constraint:
    """A deferred constraint: ``inputs`` determine ``output`` once they are known."""

    __slots__ = ("done", "inputs", "output", "queued", "span", "where")

    def __init__(self, inputs: Sequence[Type], output: Type, span: Span | None,
                 where: str | None):
        self.inputs = tuple(inputs)
        self.output = output
        self.span = span
        self.where = where
        self.done = False
        self.queued = False

    def blocker(self, solver: TypeSolver) -> IncompleteType | None:
        """A hole that must be bound before this can be solved, or None."""
        raise NotImplementedError

    def solve(self, solver: TypeSolver) -> Type:
        """The output type (the inputs being known); raises IRTypeError."""
        raise NotImplementedError

    def name(self) -> str:
        raise NotImplementedError

    def error(self, message: str) -> IRTypeError:
        return locate(IRTypeError(message), self.span, self.where)

    def unsolved_error(self, solver: TypeSolver) -> IRTypeError:
        known = ", ".join(str(solver.resolve(t)) for t in self.inputs)
        return self.error(f"{self.name()}: cannot infer the type of its result: its input "
                          f"types are not known ({known}); annotate the variables they come "
                          "from")


class RelationConstraint(Constraint):
    """An operator's type relation: solved when every input type is fully known (holds no
    hole), by ``OpDef.infer_type`` with the call's attributes."""

    __slots__ = ("attrs", "opdef")

    def __init__(self, opdef: OpDef, inputs: Sequence[Type], output: Type, attrs: Attrs,
                 span: Span | None, where: str | None):
        super().__init__(inputs, output, span, where)
        self.opdef = opdef
        self.attrs = attrs

    def name(self) -> str:
        return self.opdef.name

    def blocker(self, solver: TypeSolver) -> IncompleteType | None:
        for t in self.inputs:
            if type(t) is TensorType:
                continue
            hole = solver.first_hole(solver.resolve(t))
            if hole is not None:
                return hole
        return None

    def solve(self, solver: TypeSolver) -> Type:
        inputs = [t if type(t) is TensorType else solver.resolve(t) for t in self.inputs]
        try:
            return self.opdef.infer_type(inputs, self.attrs)
        except IRTypeError as err:
            raise locate(err, self.span, self.where) from err.__cause__


class ProjectionConstraint(Constraint):
    """``tuple.index``: solved when the projected value's type is known to be a tuple."""

    __slots__ = ("index",)

    def __init__(self, value: Type, index: int, output: Type, span: Span | None,
                 where: str | None):
        super().__init__((value,), output, span, where)
        self.index = index

    def name(self) -> str:
        return f"the projection .{self.index}"

    def blocker(self, solver: TypeSolver) -> IncompleteType | None:
        t = solver.find(self.inputs[0])
        return t if type(t) is IncompleteType else None

    def solve(self, solver: TypeSolver) -> Type:
        return project(solver.resolve(self.inputs[0]), self.index, self.error)


def project(t: Type, index: int, error) -> Type:
    """Field ``index`` of tuple type ``t``; ``error(message)`` builds the error otherwise."""
    if not isinstance(t, TupleType):
        raise error(f"the projection .{index} needs a tuple, got a value of type {t}")
    if index >= len(t.fields):
        raise error(f"the projection .{index} is out of range for a tuple of "
                    f"{len(t.fields)} field{'s' * (len(t.fields) != 1)} (type {t})")
    return t.fields[index]


class TypeSolver:
    """Union-find over holes plus the deferred constraints (see the module docstring)."""

    def __init__(self) -> None:
        self._parent: dict[int, Type] = {}  # hole id -> what it is bound to
        self._watch: dict[int, list[Constraint]] = {}  # hole id -> constraints waiting on it
        self._ready: list[Constraint] = []
        self.constraints: list[Constraint] = []

    # --------------------------------------------------------------------- holes

    @staticmethod
    def fresh() -> IncompleteType:
        return IncompleteType.fresh()

    def find(self, t: Type) -> Type:
        """The representative of ``t``: a hole's binding (followed to the end of the
        chain: an unbound hole or a type that is not a hole), else ``t``."""
        if type(t) is not IncompleteType:
            return t
        parent = self._parent
        path = []
        cur = t
        while True:
            nxt = parent.get(cur.id)
            if nxt is None:
                root = cur
                break
            path.append(cur.id)
            if type(nxt) is not IncompleteType:
                root = nxt
                break
            cur = nxt
        for i in path:
            parent[i] = root
        return root

    def resolve(self, t: Type) -> Type:
        """``t`` with every bound hole replaced by its (resolved) binding."""
        kind = type(t)
        if kind is TensorType or kind is TypeVar or kind is GlobalTypeVar:
            return t
        if kind is IncompleteType:
            root = self.find(t)
            if type(root) is IncompleteType:
                return root
            out = self.resolve(root)
            if out is not root:
                self._parent[t.id] = out
            return out
        if kind is TupleType:
            fields = tuple(self.resolve(f) for f in t.fields)
            return t if _same(fields, t.fields) else TupleType(fields)
        if kind is FuncType:
            args = tuple(self.resolve(a) for a in t.arg_types)
            ret = self.resolve(t.ret_type)
            cons = tuple(self.resolve(c) for c in t.type_constraints)
            if _same(args, t.arg_types) and ret is t.ret_type and _same(cons,
                                                                        t.type_constraints):
                return t
            return FuncType(args, ret, t.type_params, cons)
        if kind is RefType:
            value = self.resolve(t.value)
            return t if value is t.value else RefType(value)
        if kind is TypeCall:
            func = self.resolve(t.func)
            args = tuple(self.resolve(a) for a in t.args)
            return t if func is t.func and _same(args, t.args) else TypeCall(func, args)
        if kind is TypeRelation:
            args = tuple(self.resolve(a) for a in t.args)
            return t if _same(args, t.args) else TypeRelation(t.func_name, args,
                                                              t.num_inputs, t.attrs)
        return t

    @staticmethod
    def first_hole(t: Type) -> IncompleteType | None:
        """The first hole in (resolved) ``t``, or None."""
        if type(t) is TensorType:
            return None
        for s in walk_type(t):
            if type(s) is IncompleteType:
                return s
        return None

    def _bind(self, hole: IncompleteType, t: Type) -> None:
        if type(t) is not TensorType:
            resolved = self.resolve(t)
            if type(resolved) is not IncompleteType and any(
                    s is hole or (type(s) is IncompleteType and s.id == hole.id)
                    for s in walk_type(resolved)):
                raise Mismatch(f"{hole} occurs in {resolved} (an infinite type)")
        self._parent[hole.id] = t
        waiting = self._watch.pop(hole.id, None)
        if waiting:
            for c in waiting:
                if not c.done and not c.queued:
                    c.queued = True
                    self._ready.append(c)

    # ----------------------------------------------------------------------- unify

    def unify(self, a: Type, b: Type) -> Type:
        """Make ``a`` and ``b`` equal (binding holes); their unified type. Raises
        ``Mismatch``."""
        if a is b:
            return a
        a, b = self.find(a), self.find(b)
        if a is b:
            return a
        ka, kb = type(a), type(b)
        if ka is IncompleteType:
            if kb is IncompleteType and a.id == b.id:
                return a
            self._bind(a, b)
            return b
        if kb is IncompleteType:
            self._bind(b, a)
            return a
        if ka is TensorType and kb is TensorType:
            return self._unify_tensors(a, b)
        if ka is GlobalTypeVar and kb is TypeCall and not b.args:
            self.unify(a, b.func)
            return b
        if kb is GlobalTypeVar and ka is TypeCall and not a.args:
            self.unify(a.func, b)
            return a
        if ka is not kb:
            raise self._differ(a, b)
        if ka is TupleType:
            if len(a.fields) != len(b.fields):
                raise Mismatch(f"tuples of {len(a.fields)} and {len(b.fields)} fields")
            fields = []
            for i, (x, y) in enumerate(zip(a.fields, b.fields, strict=True)):
                try:
                    fields.append(self.unify(x, y))
                except Mismatch as m:
                    raise m.inside(f"field {i}") from None
            return TupleType(tuple(fields))
        if ka is FuncType:
            return self._unify_funcs(a, b)
        if ka is RefType:
            try:
                return RefType(self.unify(a.value, b.value))
            except Mismatch as m:
                raise m.inside("referenced value") from None
        if ka is TypeCall:
            try:
                func = self.unify(a.func, b.func)
            except Mismatch as m:
                raise self._differ(a, b) if m.top else m from None
            if len(a.args) != len(b.args):
                raise Mismatch(f"{len(a.args)} vs {len(b.args)} type arguments")
            args = []
            for i, (x, y) in enumerate(zip(a.args, b.args, strict=True)):
                try:
                    args.append(self.unify(x, y))
                except Mismatch as m:
                    raise m.inside(f"type argument {i}") from None
            return TypeCall(func, tuple(args))
        if ka is GlobalTypeVar:
            if a.name != b.name:
                raise self._differ(a, b)
            return a
        # TypeVar (rigid: equal only to itself), TypeRelation, TypeData
        if a == b:
            return a
        raise self._differ(a, b)

    def _differ(self, a: Type, b: Type) -> Mismatch:
        return Mismatch(f"{self.resolve(a)} vs {self.resolve(b)}", top=True)

    @staticmethod
    def _unify_tensors(a: TensorType, b: TensorType) -> TensorType:
        if a.dtype != b.dtype:
            raise Mismatch(f"dtype {a.dtype} vs {b.dtype}")
        if len(a.shape) != len(b.shape):
            raise Mismatch(f"rank {len(a.shape)} vs {len(b.shape)}")
        if a.shape == b.shape:
            return a
        dims = []
        for i, (x, y) in enumerate(zip(a.shape, b.shape, strict=True)):
            if x is Any or y is Any:
                dims.append(Any)
            elif x == y:
                dims.append(x)
            else:
                raise Mismatch(f"dimension {i}: {x} vs {y}")
        return TensorType(tuple(dims), a.dtype)

    def _unify_funcs(self, a: FuncType, b: FuncType) -> FuncType:
        if len(a.type_params) != len(b.type_params):
            raise Mismatch(f"functions with {len(a.type_params)} and {len(b.type_params)} "
                           "type parameters")
        if len(a.arg_types) != len(b.arg_types):
            raise Mismatch(f"functions of {len(a.arg_types)} and {len(b.arg_types)} "
                           "parameters")
        b_args, b_ret = b.arg_types, b.ret_type
        if b.type_params:  # rename b's type parameters to a's (in holes bound to them too)
            b = self.resolve(b)
            b_args, b_ret = b.arg_types, b.ret_type
            rename = dict(zip(b.type_params, a.type_params, strict=True))
            b_args = tuple(substitute(t, rename) for t in b_args)
            b_ret = substitute(b_ret, rename)
        args = []
        for i, (x, y) in enumerate(zip(a.arg_types, b_args, strict=True)):
            try:
                args.append(self.unify(x, y))
            except Mismatch as m:
                raise m.inside(f"parameter {i + 1}") from None
        try:
            ret = self.unify(a.ret_type, b_ret)
        except Mismatch as m:
            raise m.inside("return type") from None
        return FuncType(tuple(args), ret, a.type_params, a.type_constraints)

    # ----------------------------------------------------------------- constraints

    def add(self, c: Constraint) -> None:
        """Record ``c`` and try it at once (then whatever that woke up)."""
        self.constraints.append(c)
        self._attempt(c)
        self.drain()

    def relation(self, rel: TypeRelation, span: Span | None, where: str | None) -> None:
        """Add the constraint of a ``TypeRelation`` (an operator's, by its name) whose last
        argument is the output."""
        try:
            opdef = Op.get(rel.func_name).opdef
        except KeyError:
            raise locate(IRTypeError(f"unknown type relation {rel.func_name}"), span,
                         where) from None
        if len(rel.args) != rel.num_inputs + 1:
            raise locate(IRTypeError(f"type relation {rel.func_name}: expected one output, "
                                     f"got {len(rel.args) - rel.num_inputs}"), span, where)
        attrs = opdef.make_attrs(rel.attrs or None)
        self.add(RelationConstraint(opdef, rel.args[:-1], rel.args[-1], attrs, span, where))

    def _attempt(self, c: Constraint) -> None:
        hole = c.blocker(self)
        if hole is not None:
            self._watch.setdefault(hole.id, []).append(c)
            return
        c.done = True
        out = c.solve(self)
        try:
            self.unify(c.output, out)
        except Mismatch as m:
            raise c.error(f"{c.name()}: its result has type {out}, but "
                          f"{self.resolve(c.output)} is expected{m.explain()}") from None

    def drain(self) -> None:
        """Retry the constraints whose awaited holes were bound, to a fixed point."""
        ready = self._ready
        while ready:
            c = ready.pop()
            c.queued = False
            if not c.done:
                self._attempt(c)

    def unsolved(self) -> list[Constraint]:
        return [c for c in self.constraints if not c.done]


def _same(xs: tuple, ys: tuple) -> bool:
    return all(x is y for x, y in zip(xs, ys, strict=True))
