"""Structural equality and hashing of expressions and types, up to renaming of bound
variables (alpha-equivalence).

Variables bound by ``Let``, ``Function`` parameters and match patterns, and type variables
bound by a function's (or a ``FuncType``'s, or a ``TypeData``'s) type parameters, are
equal when they are bound at corresponding places: ``fn (%x) { %x }`` equals
``fn (%y) { %y }``. Free variables are equal only to themselves, unless
``map_free_vars`` (then they may correspond too, consistently). Spans and checked types
are ignored; constants compare by dtype, shape and bytes; globals, operators and
constructors by name. Sharing is invisible: a DAG equals the tree it unfolds to, as long as
no binder is shared (a binder bound at two places is one variable, as in the IR).

Both walks use an explicit stack, so a let chain thousands deep (a model in A-normal form)
compares and hashes without deep recursion, and visit each shared node once.
``structural_hash`` agrees with ``structural_equal`` and is the same in every process for
expressions without free variables (free ones hash by identity).
"""

from __future__ import annotations

from .expr import (
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
    pattern_vars,
)
from .types import Type, TypeVar, stable_str_hash, type_equal, type_hash, walk_type

Node = Expr | Type


def structural_equal(lhs: Node | None, rhs: Node | None, map_free_vars: bool = False) -> bool:
    """Whether two expressions (or two types) are equal up to renaming of bound variables
    (see the module docstring)."""
    return _Equal(map_free_vars).run(lhs, rhs)


def assert_structural_equal(lhs: Node | None, rhs: Node | None,
                            map_free_vars: bool = False) -> None:
    """Raise AssertionError naming the first pair of sub-terms that differ, if any."""
    eq = _Equal(map_free_vars)
    if not eq.run(lhs, rhs):
        a, b = eq.mismatch
        raise AssertionError(f"not structurally equal: {a!r} differs from {b!r}")


def structural_hash(node: Node | None, map_free_vars: bool = False) -> int:
    """A hash consistent with ``structural_equal`` (equal terms hash equal)."""
    if node is None:
        return 0
    if isinstance(node, Type):
        return _Hasher(map_free_vars).type(node)
    return _Hasher(map_free_vars).expr(node)


# ---------------------------------------------------------------------------------- equal


class _Equal:
    def __init__(self, map_free: bool):
        self.map_free = map_free
        self.lvars: dict[int, Var] = {}  # id of a lhs variable -> its rhs counterpart
        self.rvars: dict[int, Var] = {}
        self.ltv: dict[int, TypeVar] = {}  # the same for type variables
        self.rtv: dict[int, TypeVar] = {}
        self.done: set[tuple[int, int]] = set()
        self.mismatch: tuple[object, object] | None = None

    def run(self, a: Node | None, b: Node | None) -> bool:
        if a is None or b is None or isinstance(a, Type) or isinstance(b, Type):
            if a is None or b is None or not (isinstance(a, Type) and isinstance(b, Type)):
                ok = a is b
            else:
                ok = self.types(a, b)
            if not ok:
                self.mismatch = (a, b)
            return ok
        stack: list[tuple[Expr, Expr]] = [(a, b)]
        while stack:
            a, b = stack.pop()
            key = (id(a), id(b))
            if key in self.done:
                continue
            self.done.add(key)
            if not self.node(a, b, stack):
                self.mismatch = (a, b)
                return False
        return True

    def types(self, a: Type | None, b: Type | None) -> bool:
        if a is None or b is None:
            return a is b
        return type_equal(a, b, self.ltv, self.rtv, self.map_free)

    def all_types(self, xs: tuple[Type, ...], ys: tuple[Type, ...]) -> bool:
        return len(xs) == len(ys) and all(self.types(x, y) for x, y in zip(xs, ys, strict=True))

    def define(self, a: Var, b: Var) -> bool:
        """``a`` and ``b`` are bound at corresponding places."""
        mapped = self.lvars.get(id(a))
        if mapped is not None:
            return mapped is b
        if id(b) in self.rvars:
            return False
        self.lvars[id(a)], self.rvars[id(b)] = b, a
        return self.types(a.type_annotation, b.type_annotation)

    def define_type_params(self, xs: tuple[TypeVar, ...], ys: tuple[TypeVar, ...]) -> bool:
        if len(xs) != len(ys):
            return False
        for x, y in zip(xs, ys, strict=True):
            mapped = self.ltv.get(id(x))
            if mapped is not None:
                if mapped is not y:
                    return False
                continue
            if id(y) in self.rtv or x.kind != y.kind:
                return False
            self.ltv[id(x)], self.rtv[id(y)] = y, x
        return True

    def use(self, a: Var, b: Var) -> bool:
        mapped = self.lvars.get(id(a))
        if mapped is not None:
            return mapped is b
        if id(b) in self.rvars:
            return False
        if a is b:
            return True
        return self.map_free and self.define(a, b)

    def pattern(self, a: Pattern, b: Pattern) -> bool:
        if type(a) is not type(b):
            return False
        if isinstance(a, PatternWildcard):
            return True
        if isinstance(a, PatternVar):
            return self.define(a.var, b.var)
        if isinstance(a, PatternConstructor) and a.constructor != b.constructor:
            return False
        return len(a.patterns) == len(b.patterns) and all(
            self.pattern(x, y) for x, y in zip(a.patterns, b.patterns, strict=True))

    def node(self, a: Expr, b: Expr, stack: list[tuple[Expr, Expr]]) -> bool:
        kind = type(a)
        if kind is not type(b):
            return False
        if kind is Var:
            return self.use(a, b)
        if kind in (GlobalVar, Op, Constructor):
            return a == b
        if kind is Constant:
            return a.same_value(b)
        if kind is Call:
            if (len(a.args) != len(b.args) or a.attrs != b.attrs
                    or not self.all_types(a.type_args, b.type_args)):
                return False
            stack.extend(zip((a.op, *a.args), (b.op, *b.args), strict=True))
        elif kind is Tuple:
            if len(a.fields) != len(b.fields):
                return False
            stack.extend(zip(a.fields, b.fields, strict=True))
        elif kind is TupleGetItem:
            if a.index != b.index:
                return False
            stack.append((a.tuple_value, b.tuple_value))
        elif kind is Let:
            if not self.define(a.var, b.var):
                return False
            stack += [(a.body, b.body), (a.value, b.value)]
        elif kind is Function:
            if (len(a.params) != len(b.params) or a.attrs != b.attrs
                    or not self.define_type_params(a.type_params, b.type_params)
                    or not all(self.define(x, y) for x, y in zip(a.params, b.params, strict=True))
                    or not self.types(a.ret_type, b.ret_type)):
                return False
            stack.append((a.body, b.body))
        elif kind is If:
            stack += [(a.false_branch, b.false_branch), (a.true_branch, b.true_branch),
                      (a.cond, b.cond)]
        elif kind is Match:
            if a.complete != b.complete or len(a.clauses) != len(b.clauses):
                return False
            for x, y in zip(a.clauses, b.clauses, strict=True):
                if not self.pattern(x.lhs, y.lhs):
                    return False
                stack.append((x.rhs, y.rhs))
            stack.append((a.data, b.data))
        elif kind is RefCreate:
            stack.append((a.value, b.value))
        elif kind is RefRead:
            stack.append((a.ref, b.ref))
        elif kind is RefWrite:
            stack += [(a.value, b.value), (a.ref, b.ref)]
        else:
            raise TypeError(f"structural_equal: unknown expression kind {kind.__name__}")
        return True


# ----------------------------------------------------------------------------------- hash

_CODES = {k: i + 100 for i, k in enumerate((
    Var, GlobalVar, Constant, Op, Constructor, Call, Tuple, TupleGetItem, Let, Function, If,
    Match, RefCreate, RefRead, RefWrite, PatternWildcard, PatternVar, PatternConstructor,
    PatternTuple))}


def _children(e: Expr) -> tuple[Expr, ...]:
    kind = type(e)
    if kind is Call:
        return (e.op, *e.args)
    if kind is Tuple:
        return e.fields
    if kind is TupleGetItem:
        return (e.tuple_value,)
    if kind is Let:
        return (e.var, e.value, e.body)
    if kind is Function:
        return (*e.params, e.body)
    if kind is If:
        return (e.cond, e.true_branch, e.false_branch)
    if kind is Match:
        return (e.data, *(c.rhs for c in e.clauses))
    if kind is RefCreate:
        return (e.value,)
    if kind is RefRead:
        return (e.ref,)
    if kind is RefWrite:
        return (e.ref, e.value)
    return ()


class _Hasher:
    def __init__(self, map_free: bool):
        self.map_free = map_free
        self.vars: dict[int, int] = {}  # id of a bound variable -> its binding index
        self.tvars: dict[int, int] = {}  # the same for type variables
        self.memo: dict[int, int] = {}

    def bind(self, v: Var) -> None:
        self.vars.setdefault(id(v), len(self.vars))

    def type(self, t: Type | None) -> int:
        if t is None:
            return 0
        if self.map_free:
            for sub in walk_type(t):
                if isinstance(sub, TypeVar):
                    self.tvars.setdefault(id(sub), len(self.tvars))
        return type_hash(t, self.tvars)

    def binder(self, v: Var) -> tuple[int, int]:
        return self.vars[id(v)], self.type(v.type_annotation)

    def pattern(self, p: Pattern) -> int:
        code = _CODES[type(p)]
        if isinstance(p, PatternVar):
            return hash((code, *self.binder(p.var)))
        if isinstance(p, PatternConstructor):
            c = p.constructor
            return hash((code, stable_str_hash(c.name), c.tag,
                         *(self.pattern(q) for q in p.patterns)))
        if isinstance(p, PatternTuple):
            return hash((code, len(p.patterns), *(self.pattern(q) for q in p.patterns)))
        return code

    def enter(self, e: Expr) -> None:
        """Number the variables ``e`` binds (before its children are walked)."""
        kind = type(e)
        if kind is Let:
            self.bind(e.var)
        elif kind is Function:
            for p in e.type_params:
                self.tvars.setdefault(id(p), len(self.tvars))
            for p in e.params:
                self.bind(p)
        elif kind is Match:
            for c in e.clauses:
                for v in pattern_vars(c.lhs):
                    self.bind(v)
        elif kind is Var and self.map_free:
            self.bind(e)

    def expr(self, root: Expr) -> int:
        memo = self.memo
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in memo:
                continue
            if ready:
                memo[id(e)] = self.leave(e)
                continue
            self.enter(e)
            stack.append((e, True))
            stack.extend((c, False) for c in reversed(_children(e)) if id(c) not in memo)
        return memo[id(root)]

    def leave(self, e: Expr) -> int:
        """The hash of ``e``, its children's being in the memo."""
        kind = type(e)
        code = _CODES[kind]
        h = self.memo
        if kind is Var:
            index = self.vars.get(id(e))
            return hash((code, index)) if index is not None else hash((code, -1, id(e)))
        if kind is GlobalVar or kind is Op:
            return hash((code, stable_str_hash(e.name)))
        if kind is Constant:
            return hash((code, e.stable_hash()))
        if kind is Constructor:
            return hash((code, stable_str_hash(e.name), e.tag,
                         stable_str_hash(e.belong_to.name)))
        if kind is Call:
            return hash((code, h[id(e.op)], len(e.args), *(h[id(a)] for a in e.args),
                         e.attrs.stable_hash(), *(self.type(t) for t in e.type_args)))
        if kind is TupleGetItem:
            return hash((code, e.index, h[id(e.tuple_value)]))
        if kind is Let:
            return hash((code, *self.binder(e.var), h[id(e.value)], h[id(e.body)]))
        if kind is Function:
            return hash((code, len(e.type_params), *(self.binder(p) for p in e.params),
                         self.type(e.ret_type), e.attrs.stable_hash(), h[id(e.body)]))
        if kind is Match:
            return hash((code, e.complete, h[id(e.data)],
                         *((self.pattern(c.lhs), h[id(c.rhs)]) for c in e.clauses)))
        children = _children(e)
        return hash((code, len(children), *(h[id(c)] for c in children)))


__all__ = ["assert_structural_equal", "structural_equal", "structural_hash"]
