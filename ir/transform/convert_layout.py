"""ConvertLayout: run ``nn.conv2d`` in a desired data/kernel layout (``NHWC``/``HWIO``...)
and let the operators around it follow, with layout changes (``transpose``) only where the
converted region meets an operator that must see the original layout.

Every rewritten expression carries its layout relative to the original: None (the same
tensor), or a permutation ``p`` (it holds ``transpose(original, p)``: its axis ``i`` is the
original's axis ``p[i]``), or, for tuples, one such per field. Operators then:

- ``nn.conv2d``: takes its data in the desired layout and its kernel in the desired kernel
  layout (a transpose is inserted on an input not already in it; a constant kernel is
  transposed at once), and produces the desired layout.
- follow their input's layout: elementwise unary operators (``nn.relu``, ``exp``, ``clip``,
  ``cast``...); ``nn.max_pool2d`` / ``nn.avg_pool2d`` / ``nn.global_avg_pool2d`` (their
  ``layout`` attribute permuted); ``nn.bias_add``, ``nn.batch_norm``, ``nn.layer_norm``,
  ``nn.softmax``, ``nn.log_softmax`` (``axis`` remapped); ``split`` and ``concatenate``
  (``axis``; concatenate brings all fields to the first converted field's layout);
  ``nn.pad`` (``pad_width`` permuted); reductions ``sum``/``mean``/``max``/``min``/
  ``prod`` (``axis`` remapped; without ``keepdims`` the remaining axes keep their order).
- broadcasting binary operators (``add``, ``multiply``, comparisons...): take the layout of
  their first converted operand; another operand is brought to it — a lower-rank one (a
  per-channel ``(C, 1, 1)`` constant) gets leading axes of size 1 first; constants are
  transposed at once; scalars need nothing.
- ``transpose`` absorbs its input's layout (its ``axes`` are composed; it disappears when
  they cancel out) and gives the original layout.
- everything else — ``reshape``, ``nn.dense``, ``strided_slice``, calls of functions, a
  function's result, ``if`` / ``match`` parts, references — sees the original layout: a
  converted input gets one transpose back (shared by all such users).

``let``-bound values keep their converted layout (the variable is rebound, unannotated, so
A-normal form converts as well as graph form). So a ResNet body in NCHW converted to NHWC
has one transpose at its input and one before its flatten. Packed layouts (``NCHW8c``) are
converted by ``pack_layout`` (``ConvertLayout({"nn.conv2d": ("NCHW16c", "default")})``),
which builds on this converter. ``Primitive`` functions are not entered. The pass infers
types first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..expr import (
    Call,
    Clause,
    Constant,
    Expr,
    Function,
    If,
    Let,
    Match,
    Op,
    RefCreate,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ..module import Module
from ..op import make_call
from ..op.relations import packed_block, reduce_axes
from ..types import TensorType, TupleType
from ._util import Rewriter, is_primitive, map_typed_functions, perm_or_none
from .pass_infra import Pass, PassContext, module_pass

__all__ = ["ConvertLayout", "convert_layout"]

_UNARY = frozenset({"nn.relu", "negative", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
                    "erf", "abs", "floor", "ceil", "clip", "cast", "logical_not"})
_BINARY = frozenset({"add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
                     "less", "greater", "equal", "less_equal", "greater_equal", "not_equal",
                     "logical_and", "logical_or", "logical_xor"})
_POOLS = frozenset({"nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d"})
_AXIS_OPS = frozenset({"nn.bias_add", "nn.batch_norm", "nn.layer_norm", "nn.softmax",
                       "nn.log_softmax"})
_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod"})
_DEFAULT_KERNEL = {"NCHW": "OIHW", "NHWC": "HWIO"}

Perm = tuple[int, ...]


class _TupleLayout:
    """The layouts of a tuple's fields."""

    __slots__ = ("fields",)

    def __init__(self, fields: tuple) -> None:
        self.fields = tuple(fields)


def _rank(e: Expr) -> int | None:
    t = e.checked_type_or_none
    return len(t.shape) if isinstance(t, TensorType) else None


def _inverse(p: Perm) -> Perm:
    return tuple(int(i) for i in np.argsort(p))


def _transpose(e: Expr, axes: Perm) -> Expr:
    if isinstance(e, Constant):
        return Constant(np.ascontiguousarray(np.transpose(e.data, axes)))
    return make_call("transpose", e, axes=axes)


class _Convert(Rewriter):
    def __init__(self, data_layout: str, kernel_layout: str):
        super().__init__()
        self.data_layout, self.kernel_layout = data_layout, kernel_layout
        self.lay: dict[int, object] = {}  # id(original node) -> layout of its rewrite
        self.converted: dict[tuple[int, Perm | None], Expr] = {}
        self.rules: dict[str, Callable[[Call], tuple[Expr, object] | None]] = {
            "nn.conv2d": self.conv2d, "concatenate": self.concatenate, "split": self.split,
            "transpose": self.transpose, "nn.pad": self.pad}
        for names, rule in ((_UNARY, self.unary), (_BINARY, self.binary),
                            (_POOLS, self.pool), (_AXIS_OPS, self.axis_op),
                            (_REDUCTIONS, self.reduction)):
            self.rules.update(dict.fromkeys(names, rule))

    # ------------------------------------------------------------- layout changes

    def tensor_layout(self, e: Expr) -> Any:
        """The layout of ``e``'s rewrite (None also for tuples)."""
        lay = self.lay.get(id(e))
        return None if isinstance(lay, _TupleLayout) else lay

    def restore(self, e: Expr, layout: object) -> Expr:
        """``e`` (holding ``layout``) in the original layout."""
        if layout is None:
            return e
        if isinstance(layout, _TupleLayout):
            fields = [e.fields[i] if type(e) is Tuple else TupleGetItem(e, i)
                      for i in range(len(layout.fields))]
            return Tuple([self.restore(f, lay)
                          for f, lay in zip(fields, layout.fields, strict=True)])
        return self.restore_tensor(e, layout)

    def restore_tensor(self, e: Expr, layout: Any) -> Expr:
        """Tensor ``e`` (holding ``layout``, not None) in the original layout."""
        return _transpose(e, _inverse(layout))

    def change(self, e: Expr, new: Expr, have: Any, want: Any) -> Expr:
        """``new`` (the rewrite of original ``e``, holding ``have``) in layout ``want``
        (neither None for both)."""
        if have is None:
            rank = _rank(e)
            extra = len(want) - (rank if rank is not None else len(want))
            if extra > 0:  # a lower-rank operand broadcast against a converted one
                new = (Constant(new.data.reshape((1,) * extra + new.shape))
                       if isinstance(new, Constant)
                       else make_call("expand_dims", new, axis=0, num_newaxis=extra))
            axes = want
        else:
            axes = tuple(have.index(w) for w in want)
        return _transpose(new, axes)

    def as_layout(self, e: Expr, want: Perm | None) -> Expr:
        """The rewrite of original ``e`` holding layout ``want`` (None: the original one);
        each conversion of a node is built once and shared."""
        new = self.visit(e)
        have = self.lay.get(id(e))
        if have == want:
            return new
        key = (id(e), want)
        hit = self.converted.get(key)
        if hit is not None:
            return hit
        if want is None and type(e) is Tuple:  # field by field, sharing their restores
            out = Tuple([self.as_layout(f, None) for f in e.fields], e.span)
        elif want is None and type(e) is Let:  # inside the chain, where the result is made
            out = self._restore_let(e, new)
        elif want is None:
            out = self.restore(new, have)
        else:
            out = self.change(e, new, have, want)
        self.converted[key] = out
        return out

    def _restore_let(self, e: Let, new: Expr) -> Expr:
        """The let chain ``new`` (the rewrite of ``e``: one let for each of e's) with its
        final body brought back to the original layout."""
        lets = []
        while type(e) is Let and type(new) is Let:
            lets.append(new)
            e, new = e.body, new.body
        out = self.as_layout(e, None)
        for let in reversed(lets):
            out = Let(let.var, let.value, out, let.span)
        return out

    # -------------------------------------------------------------------- calls

    def visit_call(self, e: Call) -> Expr:
        if isinstance(e.op, Op):
            rule = self.rules.get(e.op.name)
            result = rule(e) if rule is not None else None
            if result is not None:
                new, lay = result
                if lay is not None:
                    self.lay[id(e)] = lay
                return new
        op = self.visit(e.op)
        args = [self.as_layout(a, None) for a in e.args]
        if op is e.op and all(a is b for a, b in zip(args, e.args, strict=True)):
            return e
        return Call(op, args, e.attrs, e.type_args, e.span)

    def conv2d(self, e: Call) -> tuple[Expr, object] | None:
        a = e.attrs
        want_d, want_k = self.data_layout, self.kernel_layout
        if a.data_layout == want_d and a.kernel_layout == want_k:
            return None
        out_layout = a.out_layout or a.data_layout
        data = self.as_layout(e.args[0], perm_or_none([a.data_layout.index(c)
                                                       for c in want_d]))
        kernel = self.as_layout(e.args[1], perm_or_none([a.kernel_layout.index(c)
                                                         for c in want_k]))
        new = Call(e.op, [data, kernel], a.replace(data_layout=want_d, kernel_layout=want_k,
                                                   out_layout=""), span=e.span)
        return new, perm_or_none([out_layout.index(c) for c in want_d])

    def unary(self, e: Call) -> tuple[Expr, object] | None:
        have = self.tensor_layout(e.args[0])
        if have is None:
            return None
        return Call(e.op, [self.visit(e.args[0])], e.attrs, span=e.span), have

    def binary(self, e: Call) -> tuple[Expr, object] | None:
        lays = [self.tensor_layout(x) for x in e.args]
        rank = _rank(e)
        target = next((lay for lay in lays if lay is not None), None)
        if target is None or rank is None or any(
                lay is not None and len(lay) != rank for lay in lays):
            return None
        ranks = [_rank(x) for x in e.args]
        if any(r is None for r in ranks):
            return None
        args = [self.visit(x) if lay == target or r == 0 else self.as_layout(x, target)
                for x, lay, r in zip(e.args, lays, ranks, strict=True)]
        return Call(e.op, args, e.attrs, span=e.span), target

    def pool(self, e: Call) -> tuple[Expr, object] | None:
        have = self.tensor_layout(e.args[0])
        if have is None:
            return None
        a = e.attrs
        layout = "".join(a.layout[i] for i in have)
        out_layout = a.out_layout or a.layout
        new = Call(e.op, [self.visit(e.args[0])], a.replace(layout=layout, out_layout=""),
                   span=e.span)
        return new, perm_or_none([out_layout.index(c) for c in layout])

    def axis_op(self, e: Call) -> tuple[Expr, object] | None:
        have = self.tensor_layout(e.args[0])
        if have is None:
            return None
        axis = have.index(e.attrs.axis % len(have))
        rest = [self.as_layout(x, None) for x in e.args[1:]]
        new = Call(e.op, [self.visit(e.args[0]), *rest], e.attrs.replace(axis=axis),
                   span=e.span)
        if e.op.name == "nn.batch_norm":
            return new, _TupleLayout((have, None, None))
        return new, have

    def concatenate(self, e: Call) -> tuple[Expr, object] | None:
        tup = e.args[0]
        if type(tup) is not Tuple:
            return None
        lays = [self.tensor_layout(f) for f in tup.fields]
        target = next((lay for lay in lays if lay is not None), None)
        if target is None or any(_rank(f) != len(target) for f in tup.fields):
            return None
        fields = [self.as_layout(f, target) for f in tup.fields]
        axis = target.index(e.attrs.axis % len(target))
        return Call(e.op, [Tuple(fields, tup.span)], e.attrs.replace(axis=axis),
                    span=e.span), target

    def split(self, e: Call) -> tuple[Expr, object] | None:
        have = self.tensor_layout(e.args[0])
        out = e.checked_type_or_none
        if have is None or not isinstance(out, TupleType):
            return None
        axis = have.index(e.attrs.axis % len(have))
        new = Call(e.op, [self.visit(e.args[0])], e.attrs.replace(axis=axis), span=e.span)
        return new, _TupleLayout((have,) * len(out.fields))

    def transpose(self, e: Call) -> tuple[Expr, object] | None:
        have = self.tensor_layout(e.args[0])
        if have is None:
            return None
        rank = len(have)
        axes = e.attrs.axes
        axes = tuple(reversed(range(rank))) if axes is None else tuple(x % rank for x in axes)
        composed = tuple(have.index(x) for x in axes)
        if perm_or_none(composed) is None:  # the input already holds the result
            return self.visit(e.args[0]), None
        return Call(e.op, [self.visit(e.args[0])], e.attrs.replace(axes=composed),
                    span=e.span), None

    def pad(self, e: Call) -> tuple[Expr, object] | None:
        have = self.tensor_layout(e.args[0])
        widths = e.attrs.pad_width
        if have is None or widths is None or len(widths) != len(have):
            return None
        new = Call(e.op, [self.visit(e.args[0])],
                   e.attrs.replace(pad_width=tuple(widths[i] for i in have)), span=e.span)
        return new, have

    def reduction(self, e: Call) -> tuple[Expr, object] | None:
        have = self.tensor_layout(e.args[0])
        data_type = e.args[0].checked_type_or_none
        if have is None or not isinstance(data_type, TensorType):
            return None
        axes = reduce_axes(e.op.name, data_type, e.attrs)
        new_axes = tuple(sorted(have.index(x) for x in axes))
        new = Call(e.op, [self.visit(e.args[0])],
                   e.attrs.replace(axis=new_axes, exclude=False), span=e.span)
        if e.attrs.keepdims:
            return new, have
        kept = [x for x in have if x not in axes]  # original axes, in the new order
        order = sorted(kept)
        return new, perm_or_none([order.index(x) for x in kept])

    # ---------------------------------------------------------- everything else

    def visit_tuple(self, e: Tuple) -> Expr:
        new = super().visit_tuple(e)
        lays = tuple(self.lay.get(id(f)) for f in e.fields)
        if any(lay is not None for lay in lays):
            self.lay[id(e)] = _TupleLayout(lays)
        return new

    def visit_tuple_getitem(self, e: TupleGetItem) -> Expr:
        new = super().visit_tuple_getitem(e)
        have = self.lay.get(id(e.tuple_value))
        if isinstance(have, _TupleLayout) and have.fields[e.index] is not None:
            self.lay[id(e)] = have.fields[e.index]
        return new

    def visit_let_binding(self, e: Let) -> tuple[Var, Expr]:
        value = self.visit(e.value)
        lay = self.lay.get(id(e.value))
        if lay is None:
            return self.visit(e.var), value
        var = Var(e.var.name_hint, None, e.var.span)  # its type changes with the layout
        self._memo[id(e.var)] = (e.var, var)
        self.lay[id(e.var)] = lay
        return var, value

    def rebuild_let(self, e: Let, var: Var, value: Expr, body: Expr) -> Expr:
        lay = self.lay.get(id(e.body))
        if lay is not None:
            self.lay[id(e)] = lay
        return super().rebuild_let(e, var, value, body)

    def visit_function(self, e: Function) -> Expr:
        if is_primitive(e):
            return e
        body = self.as_layout(e.body, None)
        if body is e.body:
            return e
        return Function(e.params, body, e.ret_type, e.type_params, e.attrs, e.span)

    def visit_if(self, e: If) -> Expr:
        parts = (self.as_layout(e.cond, None), self.as_layout(e.true_branch, None),
                 self.as_layout(e.false_branch, None))
        if all(a is b for a, b in zip(parts, (e.cond, e.true_branch, e.false_branch),
                                      strict=True)):
            return e
        return If(*parts, span=e.span)

    def visit_match(self, e: Match) -> Expr:
        data = self.as_layout(e.data, None)
        clauses = [self.visit_clause(c) for c in e.clauses]
        if data is e.data and all(a is b for a, b in zip(clauses, e.clauses, strict=True)):
            return e
        return Match(data, clauses, e.complete, e.span)

    def visit_clause(self, c: Clause) -> Clause:
        rhs = self.as_layout(c.rhs, None)
        return c if rhs is c.rhs else Clause(c.lhs, rhs)

    def visit_ref_create(self, e: RefCreate) -> Expr:
        value = self.as_layout(e.value, None)
        return e if value is e.value else RefCreate(value, e.span)

    def visit_ref_write(self, e: RefWrite) -> Expr:
        ref, value = self.as_layout(e.ref, None), self.as_layout(e.value, None)
        return e if ref is e.ref and value is e.value else RefWrite(ref, value, e.span)


def _check_layouts(desired: Mapping[str, tuple[str, str] | list[str]]) -> tuple[str, str]:
    unknown = [k for k in desired if k != "nn.conv2d"]
    if unknown:
        raise ValueError(f"ConvertLayout: no desired layout can be given for {unknown[0]!r} "
                         "(only nn.conv2d; the other operators follow their input)")
    if "nn.conv2d" not in desired:
        raise ValueError("ConvertLayout: desired layouts must name nn.conv2d")
    entry = desired["nn.conv2d"]
    data = entry[0] if isinstance(entry, tuple | list) else entry
    kernel = entry[1] if isinstance(entry, tuple | list) and len(entry) > 1 else "default"
    if not isinstance(data, str) or sorted(data) != sorted("NCHW"):
        raise ValueError(f"ConvertLayout: conv2d data layout {data!r} is not a permutation "
                         "of NCHW")
    if kernel == "default":
        if data not in _DEFAULT_KERNEL:
            raise ValueError(f"ConvertLayout: no default kernel layout for {data!r}; give "
                             "one")
        kernel = _DEFAULT_KERNEL[data]
    if not isinstance(kernel, str) or sorted(kernel) != sorted("OIHW"):
        raise ValueError(f"ConvertLayout: conv2d kernel layout {kernel!r} is not a "
                         "permutation of OIHW")
    return data, kernel


def convert_layout(expr: Expr, data_layout: str, kernel_layout: str) -> Expr:
    """``expr`` (typed) with its conv2d calls in the given layouts (see the module
    docstring)."""
    return _Convert(data_layout, kernel_layout).visit(expr)


def ConvertLayout(desired: Mapping[str, tuple[str, str] | list[str]] | None = None) -> Pass:
    """Convert conv2d (and the layout-aware operators around it) to ``desired``, e.g.
    ``{"nn.conv2d": ("NHWC", "HWIO")}`` (a kernel layout ``"default"`` is HWIO for NHWC,
    OIHW for NCHW), or to packed channels with ``{"nn.conv2d": ("NCHW16c", "default")}``
    (blocks of up to 16 channels, see ``pack_layout``) (opt level 3)."""
    desired = desired if desired is not None else {"nn.conv2d": ("NHWC", "HWIO")}
    max_block = _packed_request(desired)
    if max_block is not None:
        from .pack_layout import pack_layout  # builds on this module's converter

        def convert(f: Expr) -> Expr:
            return pack_layout(f, max_block)
    else:
        data, kernel = _check_layouts(desired)

        def convert(f: Expr) -> Expr:
            return convert_layout(f, data, kernel)

    def run(module: Module, ctx: PassContext) -> Module:
        return map_typed_functions(module, convert)

    return module_pass("ConvertLayout", opt_level=3)(run)


def _packed_request(desired: Mapping[str, Any]) -> int | None:
    """The largest block of a packed ``NCHW<b>c`` request for nn.conv2d (None if another
    layout is asked for); its kernel layout must be ``"default"`` (the blocks of each
    conv's kernel follow from its channel counts)."""
    entry = desired.get("nn.conv2d") if isinstance(desired, Mapping) else None
    data = entry[0] if isinstance(entry, tuple | list) and entry else entry
    block = packed_block(data) if isinstance(data, str) else None
    if block is None:
        return None
    kernel = entry[1] if isinstance(entry, tuple | list) and len(entry) > 1 else "default"
    if kernel != "default" or len(desired) != 1:
        raise ValueError(f"ConvertLayout: a packed layout {data!r} takes kernel layout "
                         f"'default' and names nn.conv2d only, got {dict(desired)!r}")
    return block
