"""CombineParallelConv2D: several ``nn.conv2d`` calls reading the same input become one
wider convolution followed by a ``split``.

Convolutions are combined when they read the same input node, have equal attributes
except ``channels`` (strides, padding, dilation, layouts, out_dtype; ``groups`` 1), and
kernels that differ only in their ``O`` axis (same window, same dtype). A group of at least
``min_num_branches`` of them becomes ``conv2d(x, concatenate(kernels, O axis))`` split
along the output's channel axis at the branches' channel counts; each branch reads its
slice (``split(...).i``), so whatever followed a branch keeps working on it. Constant
kernels are concatenated at once (one new constant); others through ``concatenate``.

Safety: only convolutions of the same scope are combined (a function body, an ``if``
branch and a match clause are separate scopes), and only when every kernel is a constant,
or a dataflow expression of constants and variables not bound by a ``let`` or a pattern
(parameters), so the combined call can be evaluated wherever the first branch was.
``Primitive`` functions are not entered. Needs types (the pass infers them first).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from ..expr import (
    Call,
    Constant,
    Expr,
    Function,
    If,
    Let,
    Match,
    Op,
    Pattern,
    Tuple,
    TupleGetItem,
    Var,
    pattern_vars,
)
from ..module import Module
from ..op import make_call
from ..visitor import ExprVisitor
from ._util import Rewriter, call_of, is_primitive, map_typed_functions, static_tensor_type
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["CombineParallelConv2D", "combine_parallel_conv2d"]


class _Collect(ExprVisitor):
    """Groups the convolutions that may be combined: key -> calls, in visit order."""

    def __init__(self) -> None:
        super().__init__()
        self.scope = 0
        self.next_scope = 1
        self.local: set[int] = set()  # ids of variables bound by lets and patterns
        self.groups: dict[Hashable, list[Call]] = {}

    def _in_scope(self, e: Expr) -> None:
        saved = self.scope
        self.scope, self.next_scope = self.next_scope, self.next_scope + 1
        self.visit(e)
        self.scope = saved

    def visit_function(self, e: Function) -> None:
        if not is_primitive(e):
            self._in_scope(e.body)

    def visit_if(self, e: If) -> None:
        self.visit(e.cond)
        self._in_scope(e.true_branch)
        self._in_scope(e.false_branch)

    def visit_match(self, e: Match) -> None:
        self.visit(e.data)
        for c in e.clauses:
            self.local.update(id(v) for v in pattern_vars(c.lhs))
            self._in_scope(c.rhs)

    def visit_pattern(self, p: Pattern) -> None:
        pass

    def visit_let_binding(self, e: Let) -> None:
        self.local.add(id(e.var))
        super().visit_let_binding(e)

    def visit_call(self, e: Call) -> None:
        super().visit_call(e)
        if call_of(e, "nn.conv2d") is None or e.attrs.groups != 1:
            return
        w_type = static_tensor_type(e.args[1])
        if w_type is None or not self._kernel_ok(e.args[1]):
            return
        o_axis = e.attrs.kernel_layout.index("O")
        shape = tuple(None if i == o_axis else d for i, d in enumerate(w_type.shape))
        key = (self.scope, id(e.args[0]), e.attrs.replace(channels=None), shape, w_type.dtype)
        self.groups.setdefault(key, []).append(e)

    def _kernel_ok(self, w: Expr) -> bool:
        stack = [w]
        while stack:
            e = stack.pop()
            if isinstance(e, Constant | Op):
                continue
            if isinstance(e, Var):
                if id(e) in self.local:
                    return False
            elif isinstance(e, Call) and isinstance(e.op, Op):
                if e.op.name == "nn.conv2d":
                    return False  # could depend on a branch of its own group
                stack.extend(e.args)
            elif isinstance(e, Tuple):
                stack.extend(e.fields)
            elif isinstance(e, TupleGetItem):
                stack.append(e.tuple_value)
            else:
                return False
        return True


class _Combine(Rewriter):
    def __init__(self, groups: list[list[Call]]):
        super().__init__()
        self.group_of: dict[int, tuple[int, list[Call]]] = {}
        for g in groups:
            for i, conv in enumerate(g):
                self.group_of[id(conv)] = (i, g)
        self.split_of: dict[int, Expr] = {}  # id(first conv of a group) -> its split

    def visit_call(self, e: Call) -> Expr:
        hit = self.group_of.get(id(e))
        if hit is None:
            return super().visit_call(e)
        index, group = hit
        split = self.split_of.get(id(group[0]))
        if split is None:
            split = self.split_of[id(group[0])] = self._combined(group)
        return TupleGetItem(split, index)

    def _combined(self, group: list[Call]) -> Expr:
        first = group[0]
        attrs = first.attrs
        o_axis = attrs.kernel_layout.index("O")
        kernels = [self.visit(c.args[1]) for c in group]
        sizes = [static_tensor_type(c.args[1]).shape[o_axis] for c in group]
        if all(isinstance(k, Constant) for k in kernels):
            kernel: Expr = Constant(np.concatenate([k.data for k in kernels], axis=o_axis))
        else:
            kernel = make_call("concatenate", Tuple(kernels), axis=o_axis)
        channels = None if any(c.attrs.channels is None for c in group) else sum(sizes)
        conv = Call(first.op, [self.visit(first.args[0]), kernel],
                    attrs.replace(channels=channels), span=first.span)
        c_axis = (attrs.out_layout or attrs.data_layout).index("C")
        bounds = tuple(int(b) for b in np.cumsum(sizes)[:-1])
        return make_call("split", conv, indices_or_sections=bounds, axis=c_axis)


def combine_parallel_conv2d(expr: Expr, min_num_branches: int = 3) -> Expr:
    """``expr`` (typed) with parallel convolutions combined (see the module docstring)."""
    collect = _Collect()
    collect.visit(expr)
    groups = [g for g in collect.groups.values() if len(g) >= max(2, min_num_branches)]
    if not groups:
        return expr
    return _Combine(groups).visit(expr)


def CombineParallelConv2D(min_num_branches: int = 3) -> Pass:
    """Combine ``min_num_branches`` or more parallel conv2d calls into one (opt level 4)."""
    if not isinstance(min_num_branches, int) or min_num_branches < 2:
        raise ValueError(f"min_num_branches must be an int >= 2, got {min_num_branches!r}")

    def run(module: Module, ctx: PassContext) -> Module:
        return map_typed_functions(module,
                                   lambda f: combine_parallel_conv2d(f, min_num_branches))

    return module_pass("CombineParallelConv2D", opt_level=4)(run)

