"""FuseOps: group operator calls into ``Primitive`` functions, each of which becomes one
kernel (one tensor-expression DAG, one tuning task).

The grouping follows the operator patterns (``OpPattern``) with a post-dominator analysis
over the dataflow graph, the way the Relay papers describe it:

1. The dataflow graph of a scope: its operator calls, tuples and tuple projections, in
   topological order. Every other expression (variables, constants, globals, calls of
   functions, ``let``/``if``/``match``/functions) is an opaque node: it never joins a
   group, and the scopes inside it are fused on their own.
2. Edge patterns: an edge into a call takes the callee's pattern, except that a
   broadcasting call whose input has the output's shape sees that input elementwise. An
   edge into an opaque node is opaque.
3. The post-dominator tree: a node's immediate post-dominator is the least common
   ancestor of its consumers; the pattern of a node in the tree is the worst (highest)
   pattern met on the paths to it. A node used outside the scope's graph (the scope's
   result) has none.
4. Phase 0: a conv2d/dense-like group (out-elementwise-fusable) absorbs the path to its
   post-dominator when that path is elementwise and everything on it is at most
   broadcast (conv + bias + relu; conv + residual add); an elementwise/broadcast group
   fuses into a post-dominator reached through injective or reduction patterns (the sink
   may be anything up to out-elementwise-fusable). Phase 1: injective groups (reshape,
   transpose, pad, concatenate with its tuple) fuse along all-injective paths.
   Reductions end a group; opaque operators (softmax, layer_norm, batch_norm, ...) and
   operators with tuple results stay alone. A group holds at most ``max_fuse_depth``
   calls.
5. Each group becomes ``fn (%p0, %p1, ..., Primitive=1) { ... }`` called on the group's
   inputs, in order of first use; constants become parameters too (so weights are not
   baked into kernels, and equal subgraphs with different weights share a kernel).

``fuse_opt_level`` 0 puts every call in its own group (useful for debugging); the pass
converts the program to graph normal form first (a ``let`` hides dataflow from fusion).
"""

from __future__ import annotations

from collections.abc import Callable

from ..expr import (
    Call,
    Clause,
    Expr,
    Function,
    If,
    Let,
    Match,
    Op,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ..module import Module
from ..op_registry import OpPattern
from ..types import TensorType
from ..visitor import dataflow_inputs
from .anf import to_graph_normal_form
from .infer_type import infer_type
from .pass_infra import ModulePass, Pass, PassContext

__all__ = ["FuseOps", "fuse_expr"]

P = OpPattern
MAX_FUSE_DEPTH = 64


class _Node:
    __slots__ = ("consumers", "expr", "index", "is_op_call", "pattern", "used_outside")

    def __init__(self, expr: Expr, index: int, pattern: OpPattern, is_op_call: bool):
        self.expr, self.index, self.pattern, self.is_op_call = expr, index, pattern, is_op_call
        self.consumers: list[tuple[_Node, OpPattern]] = []
        self.used_outside = False


def _op_pattern(e: Expr) -> tuple[OpPattern, bool]:
    if isinstance(e, Call) and isinstance(e.op, Op):
        t = e.checked_type_or_none
        if not isinstance(t, TensorType):  # split, batch_norm, dropout: tuple results
            return P.OPAQUE, True
        return e.op.opdef.pattern, True
    return P.OPAQUE, False


class _Graph:
    """The dataflow graph of one scope, nodes in topological order."""

    def __init__(self, root: Expr):
        self.nodes: list[_Node] = []
        self.index: dict[int, _Node] = {}
        stack: list[tuple[Expr, int]] = [(root, 0)]
        while stack:
            e, state = stack.pop()
            if id(e) in self.index:
                continue
            children = dataflow_inputs(e)
            if state == 0 and children:
                stack.append((e, 1))
                stack.extend((c, 0) for c in reversed(children) if id(c) not in self.index)
                continue
            pattern, is_op = _op_pattern(e)
            if isinstance(e, Tuple):
                pattern = P.TUPLE
            node = _Node(e, len(self.nodes), pattern, is_op)
            self.nodes.append(node)
            self.index[id(e)] = node
        for node in self.nodes:
            e = node.expr
            out_shape = _shape(e)
            for child in dataflow_inputs(e):
                if isinstance(e, Tuple):
                    edge = P.TUPLE
                elif not node.is_op_call:
                    edge = P.OPAQUE
                elif node.pattern == P.BROADCAST and _shape(child) == out_shape:
                    edge = P.ELEMWISE
                else:
                    edge = node.pattern
                self.index[id(child)].consumers.append((node, edge))
        self.index[id(root)].used_outside = True

    def node(self, e: Expr) -> _Node:
        return self.index[id(e)]


def _shape(e: Expr) -> tuple | None:
    t = e.checked_type_or_none
    return tuple(t.shape) if isinstance(t, TensorType) else None


class _DomNode:
    """A node of the post-dominator tree: its parent's graph index (-1: none), its depth
    and the worst pattern on the paths from the graph node to that parent."""

    __slots__ = ("depth", "parent", "pattern")

    def __init__(self, parent: int, depth: int, pattern: OpPattern):
        self.parent, self.depth, self.pattern = parent, depth, pattern


_ROOT = _DomNode(-1, 1, P.OPAQUE)


def _post_dominators(graph: _Graph) -> list[_DomNode]:
    """The post-dominator tree, indexed like the graph's nodes."""
    tree: list[_DomNode] = [_ROOT] * len(graph.nodes)
    for node in reversed(graph.nodes):
        if node.used_outside or not node.consumers:
            continue
        parent, pattern = -1, P.ELEMWISE
        for consumer, edge in node.consumers:
            if parent < 0:
                parent = consumer.index
            else:
                parent, pattern = _lca(tree, parent, consumer.index, pattern)
                if parent < 0:
                    break
            pattern = max(pattern, edge)
        if parent >= 0:
            tree[node.index] = _DomNode(parent, tree[parent].depth + 1, pattern)
    return tree


def _lca(tree: list[_DomNode], a: int, b: int, pattern: OpPattern) -> tuple[int, OpPattern]:
    """The least common ancestor of tree nodes ``a`` and ``b`` (-1 if none), with the
    pattern combined along both climbs."""
    while a != b:
        if a < 0 or b < 0:
            return -1, P.OPAQUE
        if tree[a].depth < tree[b].depth:
            a, b = b, a
        pattern = max(pattern, tree[a].pattern)
        a = tree[a].parent
    return a, pattern


class _Group:
    __slots__ = ("anchor", "num_calls", "parent", "pattern")

    def __init__(self, pattern: OpPattern, num_calls: int):
        self.parent: _Group | None = None
        self.pattern, self.num_calls = pattern, num_calls
        self.anchor = pattern == P.OUT_ELEMWISE_FUSABLE

    def root(self) -> _Group:
        g = self
        while g.parent is not None:
            g = g.parent
        node = self
        while node.parent is not None and node.parent is not g:  # path compression
            node.parent, node = g, node.parent
        return g


class _Partitioner:
    def __init__(self, graph: _Graph, max_depth: int):
        self.graph, self.max_depth = graph, max_depth
        self.groups = [_Group(n.pattern, int(n.is_op_call)) for n in graph.nodes]

    def run(self, fuse: bool) -> list[_Group]:
        if fuse:
            tree = _post_dominators(self.graph)
            for phase in (0, 1):
                for node in self.graph.nodes:
                    self._try_fuse(node, tree[node.index], phase)
        return [g.root() for g in self.groups]

    def _try_fuse(self, node: _Node, dom: _DomNode, phase: int) -> None:
        group = self.groups[node.index].root()
        if group.pattern == P.OPAQUE or dom.parent < 0:
            return
        sink = self.graph.nodes[dom.parent]
        sink_group = self.groups[sink.index].root()
        if sink_group is group:
            return
        if group.num_calls + sink_group.num_calls > self.max_depth:
            return
        if group.pattern == P.OUT_ELEMWISE_FUSABLE:
            if phase == 0 and dom.pattern == P.ELEMWISE and self._check_path(
                    node, sink, lambda kind, is_sink: kind <= P.BROADCAST):
                self._commit(node, sink)
        elif group.pattern <= P.BROADCAST:
            if dom.pattern <= P.INJECTIVE or dom.pattern == P.COMM_REDUCE:
                def fcond(kind: OpPattern, is_sink: bool) -> bool:
                    if not is_sink:
                        return kind <= P.INJECTIVE
                    return kind <= P.OUT_ELEMWISE_FUSABLE
                if self._check_path(node, sink, fcond):
                    self._commit(node, sink)
        elif group.pattern in (P.INJECTIVE, P.TUPLE) and phase == 1 and self._check_path(
                node, sink, lambda kind, is_sink: kind <= P.INJECTIVE):
            self._commit(node, sink)

    def _path_nodes(self, src: _Node, sink: _Node) -> list[_Node] | None:
        """Every node on a path from ``src`` (exclusive) to ``sink`` (inclusive); None if a
        path leaves the graph before reaching the sink."""
        seen: dict[int, _Node] = {}
        stack = [c for c, _ in src.consumers]
        while stack:
            n = stack.pop()
            if n.index in seen:
                continue
            seen[n.index] = n
            if n is sink:
                continue
            if n.index > sink.index or not n.consumers:
                return None
            stack.extend(c for c, _ in n.consumers)
        return list(seen.values())

    def _check_path(self, src: _Node, sink: _Node,
                    fcond: Callable[[OpPattern, bool], bool]) -> bool:
        nodes = self._path_nodes(src, sink)
        return nodes is not None and all(
            fcond(self.groups[n.index].root().pattern, n is sink) for n in nodes)

    def _commit(self, src: _Node, sink: _Node) -> None:
        target = self.groups[sink.index].root()
        for n in [src, *(self._path_nodes(src, sink) or [])]:
            self._merge(self.groups[n.index].root(), target)

    @staticmethod
    def _merge(child: _Group, parent: _Group) -> None:
        if child is parent:
            return
        parent.num_calls += child.num_calls
        child.parent = parent
        if child.anchor:
            parent.anchor = True
            parent.pattern = max(child.pattern, parent.pattern)


def fuse_expr(expr: Expr, fuse_opt_level: int = 2, max_fuse_depth: int = MAX_FUSE_DEPTH
              ) -> Expr:
    """``expr`` (type-checked, graph normal form) with its operator calls grouped into
    calls of ``Primitive`` functions (see the module docstring)."""
    graph = _Graph(expr)
    groups = _Partitioner(graph, max_fuse_depth).run(fuse_opt_level > 0)
    return _Rewriter(graph, groups, fuse_opt_level, max_fuse_depth).rewrite(expr)


class _Rewriter:
    def __init__(self, graph: _Graph, groups: list[_Group], level: int, depth: int):
        self.graph, self.groups, self.level, self.depth = graph, groups, level, depth
        self.members: dict[int, list[_Node]] = {}
        for node in graph.nodes:
            if self._fusible(node):
                self.members.setdefault(id(groups[node.index]), []).append(node)
        self.new: dict[int, Expr] = {}

    def _fusible(self, node: _Node) -> bool:
        """Whether the node belongs in a primitive function (a call of an operator, or a
        tuple grouped with one)."""
        return node.is_op_call or (isinstance(node.expr, Tuple)
                                   and self.groups[node.index].num_calls > 0)

    def rewrite(self, root: Expr) -> Expr:
        for node in self.graph.nodes:
            if id(node.expr) in self.new:
                continue
            group = self.groups[node.index]
            members = self.members.get(id(group))
            if members and node in members:
                if node is members[-1]:
                    self.new[id(node.expr)] = self._fused_call(members)
                continue
            self.new[id(node.expr)] = self._rebuild(node.expr)
        return self.new[id(root)]

    def _arg(self, e: Expr) -> Expr:
        return self.new[id(e)]

    def _rebuild(self, e: Expr) -> Expr:
        """A node outside every group, over the rewritten dataflow children (its inner
        scopes fused on their own)."""
        sub = lambda x: fuse_expr(x, self.level, self.depth)  # noqa: E731
        if isinstance(e, Call):
            op = e.op if not isinstance(e.op, Function) else self._function(e.op)
            return Call(op, [self._arg(a) for a in e.args], e.attrs, e.type_args, e.span)
        if isinstance(e, Tuple):
            return Tuple([self._arg(f) for f in e.fields], e.span)
        if isinstance(e, TupleGetItem):
            return TupleGetItem(self._arg(e.tuple_value), e.index, e.span)
        if isinstance(e, Function):
            return self._function(e)
        if isinstance(e, Let):
            return Let(e.var, sub(e.value), sub(e.body), e.span)
        if isinstance(e, If):
            return If(sub(e.cond), sub(e.true_branch), sub(e.false_branch), e.span)
        if isinstance(e, Match):
            return Match(sub(e.data), [Clause(c.lhs, sub(c.rhs)) for c in e.clauses],
                         e.complete, e.span)
        if isinstance(e, RefCreate):
            return RefCreate(sub(e.value), e.span)
        if isinstance(e, RefRead):
            return RefRead(sub(e.ref), e.span)
        if isinstance(e, RefWrite):
            return RefWrite(sub(e.ref), sub(e.value), e.span)
        return e

    def _function(self, f: Function) -> Function:
        if f.attrs.get("Primitive"):
            return f
        return Function(f.params, fuse_expr(f.body, self.level, self.depth), f.ret_type,
                        f.type_params, f.attrs, f.span)

    def _fused_call(self, members: list[_Node]) -> Expr:
        inside = {id(n.expr) for n in members}
        params: list[Var] = []
        args: list[Expr] = []
        param_of: dict[int, Var] = {}
        body: dict[int, Expr] = {}
        for node in members:
            e = node.expr
            new_children = []
            for child in dataflow_inputs(e):
                if id(child) in inside:
                    new_children.append(body[id(child)])
                    continue
                if id(child) not in param_of:
                    p = Var(f"p{len(params)}", child.checked_type)
                    param_of[id(child)] = p
                    params.append(p)
                    args.append(self._arg(child))
                new_children.append(param_of[id(child)])
            if isinstance(e, Tuple):
                body[id(e)] = Tuple(new_children, e.span)
            else:
                body[id(e)] = Call(e.op, new_children, e.attrs, e.type_args, e.span)
        out = members[-1]
        for node in members[:-1]:
            if node.used_outside or any(id(c.expr) not in inside for c, _ in node.consumers):
                raise AssertionError("FuseOps: a fused group has an inner result used "
                                     "outside it")
        fn = Function(params, body[id(out.expr)], out.expr.checked_type, attrs={"Primitive": 1})
        return Call(fn, args, span=out.expr.span)


def FuseOps(fuse_opt_level: int = -1, max_fuse_depth: int = MAX_FUSE_DEPTH) -> Pass:
    """The fusion pass (opt level 0, like Relay's: it always runs in a build; its
    ``fuse_opt_level`` defaults to 0 when the context's opt level is 0, else 2)."""

    def run(module: Module, ctx: PassContext) -> Module:
        level = fuse_opt_level if fuse_opt_level >= 0 else (0 if ctx.opt_level == 0 else 2)
        module = infer_type(to_graph_normal_form(infer_type(module)))
        out = module.copy()
        for gv, func in module.functions.items():
            if func.attrs.get("Primitive"):
                continue
            body = fuse_expr(func.body, level, max_fuse_depth)
            out.add(gv, Function(func.params, body, func.ret_type, func.type_params,
                                 func.attrs, func.span), update=True)
        return infer_type(out)

    return ModulePass(run, "FuseOps", 0)

