"""Call builders generated from the registry: ``ir.op.add(a, b)``, ``ir.op.nn.dense(x, w,
units=10)``. Each ``ir.op`` namespace module gets a module ``__getattr__`` from
``namespace_getattr(prefix)``, so an operator registered later (in any module) has its
builder without more code. Inputs come first, positionally; attributes follow, by keyword or
positionally in schema order; they are checked against the schema.
"""

from __future__ import annotations

from collections.abc import Callable

from ..expr import Call, Expr, Op
from ..span import Span

_builders: dict[str, Callable[..., Call]] = {}


def make_call(op_name: str, *args: object, span: Span | None = None, **attrs: object) -> Call:
    """A call of registered operator ``op_name``: the first ``num_inputs`` arguments are its
    inputs (all of them for a variadic operator), the rest its attributes in schema order;
    TypeError for a wrong count, a non-expression input or a bad attribute."""
    opdef = Op.get(op_name).opdef
    n = opdef.num_inputs
    inputs, extra = (args, ()) if n < 0 else (args[:n], args[n:])
    if n >= 0 and len(inputs) < n:
        raise TypeError(f"{op_name} takes {n} input{'s' * (n != 1)}, got {len(inputs)}")
    names = list(opdef.attrs_schema)
    if len(extra) > len(names):
        raise TypeError(f"{op_name} takes {n} inputs and {len(names)} attributes, got "
                        f"{len(args)} positional arguments")
    for name, value in zip(names, extra, strict=False):
        if name in attrs:
            raise TypeError(f"{op_name}: attribute {name} given twice")
        attrs[name] = value
    for i, x in enumerate(inputs):
        if not isinstance(x, Expr):
            raise TypeError(f"{op_name}: input {i} must be an IR expression (use ir.const "
                            f"for values), got {type(x).__name__}")
    return Call(Op.get(op_name), inputs, opdef.make_attrs(attrs), span=span)


def op_builder(op_name: str) -> Callable[..., Call]:
    """The builder function of registered operator ``op_name`` (KeyError if none)."""
    builder = _builders.get(op_name)
    if builder is None or builder.__wrapped_op__ is not Op.get(op_name):
        opdef = Op.get(op_name).opdef

        def builder(*args: object, span: Span | None = None, **attrs: object) -> Call:
            return make_call(op_name, *args, span=span, **attrs)

        short = op_name.rsplit(".", 1)[-1]
        builder.__name__ = builder.__qualname__ = short
        schema = ", ".join(f"{k}={d!r}" for k, (_, d) in opdef.attrs_schema.items())
        inputs = "*inputs" if opdef.num_inputs < 0 else ", ".join(
            f"x{i}" for i in range(opdef.num_inputs))
        builder.__doc__ = (f"{op_name}({', '.join(filter(None, [inputs, schema]))}) -> Call"
                           + (f"\n\n{opdef.doc}" if opdef.doc else ""))
        builder.__wrapped_op__ = Op.get(op_name)
        _builders[op_name] = builder
    return builder


def namespace_getattr(prefix: str) -> Callable[[str], Callable[..., Call]]:
    """A module ``__getattr__`` resolving ``<module>.<name>`` to the builder of operator
    ``prefix.name`` (``name`` alone when ``prefix`` is empty)."""

    def __getattr__(name: str) -> Callable[..., Call]:
        full = f"{prefix}.{name}" if prefix else name
        if name.startswith("__") or full not in Op._table:
            where = f"ir.op.{prefix}" if prefix else "ir.op"
            raise AttributeError(f"{where} has no operator {name!r}")
        return op_builder(full)

    return __getattr__


def namespace_ops(prefix: str) -> list[str]:
    """The short names of the operators registered under ``prefix`` (for ``dir()``)."""
    if not prefix:
        return sorted(n for n in Op._table if "." not in n)
    return sorted(n[len(prefix) + 1:] for n in Op._table
                  if n.startswith(prefix + ".") and "." not in n[len(prefix) + 1:])
