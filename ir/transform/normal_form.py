"""``ToANormalForm()`` / ``ToGraphNormalForm()``: the conversions of ``anf`` as passes over
every global function that is not ``Primitive`` (opt level 1)."""

from __future__ import annotations

from ..expr import Function
from ..module import Module
from ._util import is_primitive
from .anf import to_a_normal_form, to_graph_normal_form
from .pass_infra import Pass, PassContext, function_pass, module_pass

__all__ = ["ToANormalForm", "ToGraphNormalForm"]


def ToANormalForm() -> Pass:
    """Bind every intermediate result with a ``let`` (opt level 1)."""

    def run(func: Function, module: Module, ctx: PassContext) -> Function:
        return to_a_normal_form(func)

    return function_pass("ToANormalForm", opt_level=1)(run)


def ToGraphNormalForm() -> Pass:
    """Replace pure ``let`` bindings by sharing in the dataflow graph (opt level 1)."""

    def run(module: Module, ctx: PassContext) -> Module:
        # the whole module at once: whether a call may have an effect depends on whether
        # the program uses references anywhere, not only in this function
        out = to_graph_normal_form(module)
        for gv, func in module.functions.items():
            if is_primitive(func):
                out.add(gv, func, update=True)
        return out

    return module_pass("ToGraphNormalForm", opt_level=1)(run)
