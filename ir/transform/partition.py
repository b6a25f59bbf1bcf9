"""Partitioning for external codegens (bring your own codegen), three passes over
``@main`` (a dataflow graph):

- ``AnnotateTarget(compilers)``: each operator call that one of the external codegens
  ``compilers`` supports (its registered predicate on the operator, attributes and types,
  or a pattern of calls it claims; the first that does, in order) gets
  ``annotation.compiler_begin`` on its inputs and ``annotation.compiler_end`` on its
  output.
- ``MergeCompilerRegions()``: every annotated call starts as its own region; a call and
  the annotated call of the same compiler that feeds it join one region, in dataflow order,
  unless that would create a cycle (a path leaving the merged region through a node outside
  it and coming back: such a region could not run as one call). The annotations of each
  call then carry its region's number.
- ``PartitionGraph()``: each region becomes a global function ``@<compiler>_<n>``
  (attributes ``Compiler``, ``global_symbol``, ``Primitive``) of the values entering it,
  returning the values leaving it (a tuple when several), and ``@main`` calls it.

The builds (graph executor, VM) hand these functions to their codegen
(``ir.backend.external``); the host runs the rest. The interpreter runs their bodies.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..expr import Call, Constant, Expr, Function, GlobalVar, Op, Tuple, TupleGetItem, Var
from ..module import Module
from ..visitor import ExprMutator, dataflow_inputs, dataflow_post_order
from .anf import to_graph_normal_form
from .infer_type import infer_type
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["AnnotateTarget", "MergeCompilerRegions", "PartitionGraph", "partition_for"]

BEGIN, END = "annotation.compiler_begin", "annotation.compiler_end"


def _is(e: Expr, name: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


def _with_main(module: Module, body: Expr) -> Module:
    main = module["main"]
    out = module.copy()
    out.add("main", Function(main.params, body, main.ret_type, main.type_params, main.attrs),
            update=True)
    return out


# ----------------------------------------------------------------------------- annotate


class _Annotate(ExprMutator):
    def __init__(self, codegens: Sequence, body: Expr):
        super().__init__()
        self.codegens = codegens
        self.claims = [codegen.claims(body) for codegen in codegens]

    def visit_call(self, e: Call) -> Expr:
        call = super().visit_call(e)
        if not isinstance(e.op, Op) or e.op.name in (BEGIN, END):
            return call
        for codegen, claimed in zip(self.codegens, self.claims, strict=True):
            if id(e) in claimed:
                args = [Call(Op.get(BEGIN), [a], {"compiler": codegen.name})
                        for a in call.args]
                inner = Call(call.op, args, call.attrs, span=call.span)
                return Call(Op.get(END), [inner], {"compiler": codegen.name})
        return call


def AnnotateTarget(compilers: Sequence[str]) -> Pass:
    """Mark the calls the external codegens ``compilers`` support (module docstring)."""
    from ..backend.external import get_codegen

    codegens = [get_codegen(c) for c in compilers]

    def run(module: Module, ctx: PassContext) -> Module:
        module = infer_type(to_graph_normal_form(module))
        body = module["main"].body
        return infer_type(_with_main(module, _Annotate(codegens, body).visit(body)))

    return module_pass("AnnotateTarget", 0)(run)


# -------------------------------------------------------------------------------- merge


def _annotated_calls(body: Expr) -> dict[int, tuple[Call, str]]:
    """id(call) -> (call, compiler) for each call wrapped by a compiler_end."""
    return {id(e.args[0]): (e.args[0], e.attrs.compiler) for e in dataflow_post_order(body)
            if _is(e, END)}


def _producer(e: Expr) -> Expr:
    """The value behind annotations."""
    while _is(e, BEGIN) or _is(e, END):
        e = e.args[0]
    return e


class _Regions:
    """Regions of annotated calls over the dataflow graph without its annotations."""

    def __init__(self, body: Expr):
        self.annotated = _annotated_calls(body)
        self.nodes = [e for e in dataflow_post_order(body) if not (_is(e, BEGIN) or _is(e, END))]
        self.users: dict[int, list[Expr]] = {id(e): [] for e in self.nodes}
        for e in self.nodes:
            for child in dataflow_inputs(e):
                p = _producer(child)
                if id(p) in self.users:
                    self.users[id(p)].append(e)
        self.parent: dict[int, int] = {i: i for i in self.annotated}

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def members(self, root: int) -> set[int]:
        return {i for i in self.annotated if self.find(i) == root}

    def creates_cycle(self, union: set[int]) -> bool:
        """Whether some node outside ``union`` is both reached from it and reaches it."""
        reached: set[int] = set()
        todo = [u for i in union for u in self.users[i] if id(u) not in union]
        while todo:
            e = todo.pop()
            if id(e) in reached:
                continue
            reached.add(id(e))
            todo.extend(u for u in self.users[id(e)])
        return bool(reached & self.reaching(union))

    def reaching(self, union: set[int]) -> set[int]:
        by_id = {id(e): e for e in self.nodes}
        out: set[int] = set()
        todo = [_producer(c) for i in union for c in dataflow_inputs(by_id[i])]
        while todo:
            e = todo.pop()
            if id(e) in union or id(e) in out or id(e) not in by_id:
                continue
            out.add(id(e))
            todo.extend(_producer(c) for c in dataflow_inputs(e))
        return out

    def merge(self) -> None:
        for e in self.nodes:
            if id(e) not in self.annotated:
                continue
            compiler = self.annotated[id(e)][1]
            for child in dataflow_inputs(e):
                p = _producer(child)
                if id(p) not in self.annotated or self.annotated[id(p)][1] != compiler:
                    continue
                a, b = self.find(id(p)), self.find(id(e))
                if a == b:
                    continue
                union = self.members(a) | self.members(b)
                if not self.creates_cycle(union):
                    self.parent[b] = a


class _Number(ExprMutator):
    def __init__(self, regions: _Regions, numbers: dict[int, int]):
        super().__init__()
        self.regions = regions
        self.numbers = numbers
        self.region_of: dict[int, int] = {}

    def visit_call(self, e: Call) -> Expr:
        call = super().visit_call(e)
        if _is(e, END):
            number = self.numbers[self.regions.find(id(e.args[0]))]
            return Call(call.op, call.args, call.attrs.replace(region=number))
        if isinstance(e.op, Op) and id(e) in self.regions.annotated:
            number = self.numbers[self.regions.find(id(e))]
            args = [Call(a.op, a.args, a.attrs.replace(region=number)) if _is(a, BEGIN) else a
                    for a in call.args]
            return Call(call.op, args, call.attrs, span=call.span)
        return call


def MergeCompilerRegions() -> Pass:
    """Join neighbouring annotated calls of one compiler into regions (module
    docstring)."""

    def run(module: Module, ctx: PassContext) -> Module:
        body = module["main"].body
        regions = _Regions(body)
        regions.merge()
        roots = sorted({regions.find(i) for i in regions.annotated},
                       key=[id(e) for e in regions.nodes].index)
        numbers = {root: n for n, root in enumerate(roots)}
        return infer_type(_with_main(module, _Number(regions, numbers).visit(body)))

    return module_pass("MergeCompilerRegions", 0)(run)


# ---------------------------------------------------------------------------- partition


class _Partition:
    def __init__(self, module: Module, body: Expr):
        self.module = module
        self.memo: dict[int, Expr] = {}
        self.members: dict[int, list[Call]] = {}  # region -> its calls in dataflow order
        self.compiler: dict[int, str] = {}
        self.used_outside: set[int] = set()
        for e in dataflow_post_order(body):
            if _is(e, END):
                region, call = e.attrs.region, e.args[0]
                self.members.setdefault(region, []).append(call)
                self.compiler[region] = e.attrs.compiler
            elif _is(e, BEGIN):
                child = e.args[0]
                if _is(child, END) and child.attrs.region != e.attrs.region:
                    self.used_outside.add(id(child.args[0]))
            else:
                for child in dataflow_inputs(e):
                    if _is(child, END):
                        self.used_outside.add(id(child.args[0]))
        if _is(body, END):
            self.used_outside.add(id(body.args[0]))
        self.outputs: dict[int, Expr] = {}

    def rewrite(self, e: Expr) -> Expr:
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit
        if _is(e, END):
            region = e.attrs.region
            if id(e.args[0]) not in self.outputs:
                self.build(region)
            out = self.outputs[id(e.args[0])]
        elif isinstance(e, Call):
            op = e.op if isinstance(e.op, Op | GlobalVar) else self.rewrite(e.op)
            out = Call(op, [self.rewrite(a) for a in e.args], e.attrs, span=e.span)
        elif isinstance(e, Tuple):
            out = Tuple([self.rewrite(f) for f in e.fields])
        elif isinstance(e, TupleGetItem):
            out = TupleGetItem(self.rewrite(e.tuple_value), e.index)
        else:
            out = e
        self.memo[id(e)] = out
        return out

    def build(self, region: int) -> None:
        members = self.members[region]
        inside = {id(c) for c in members}
        inputs: dict[int, tuple[Expr, Var]] = {}
        body_of: dict[int, Expr] = {}
        for call in members:
            args = []
            for a in call.args:
                value = a.args[0] if _is(a, BEGIN) else a
                producer = value.args[0] if _is(value, END) else value
                if id(producer) in inside:
                    args.append(body_of[id(producer)])
                elif isinstance(producer, Constant):
                    args.append(producer)
                else:
                    if id(value) not in inputs:
                        inputs[id(value)] = (value, Var(f"in{len(inputs)}",
                                                        value.checked_type))
                    args.append(inputs[id(value)][1])
            body_of[id(call)] = Call(call.op, args, call.attrs, span=call.span)
        outs = [c for c in members if id(c) in self.used_outside]
        result = body_of[id(outs[0])] if len(outs) == 1 else Tuple(
            [body_of[id(c)] for c in outs])
        compiler = self.compiler[region]
        name = f"{compiler}_{region}"
        gv = GlobalVar(name)
        func = Function([v for _, v in inputs.values()], result, None, (),
                        {"Compiler": compiler, "global_symbol": name, "Primitive": 1})
        self.module.add(gv, func)
        call = Call(gv, [self.rewrite(value) for value, _ in inputs.values()])
        for i, c in enumerate(outs):
            self.outputs[id(c)] = call if len(outs) == 1 else TupleGetItem(call, i)


def PartitionGraph() -> Pass:
    """Lift each region into a global function called from ``@main`` (module
    docstring)."""

    def run(module: Module, ctx: PassContext) -> Module:
        out = module.copy()
        partition = _Partition(out, module["main"].body)
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20000))
        try:
            body = partition.rewrite(module["main"].body)
        finally:
            sys.setrecursionlimit(limit)
        return infer_type(_with_main(out, body))

    return module_pass("PartitionGraph", 0)(run)


def partition_for(module: Module, compilers: Sequence[str]) -> Module:
    """``AnnotateTarget(compilers)``, ``MergeCompilerRegions()``, ``PartitionGraph()``."""
    for p in (AnnotateTarget(compilers), MergeCompilerRegions(), PartitionGraph()):
        module = p(module)
    return module
