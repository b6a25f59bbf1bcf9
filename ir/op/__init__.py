"""The operators of the IR, registered on import: ``tensor`` (no namespace: ``add``,
``sum``...) and ``nn``. ``ir.op.<name>(...)`` / ``ir.op.nn.<name>(...)`` build calls of
registered operators (generated from the registry: see ``_make``); ``transform`` registers
the shape-manipulation and creation operators (also without a namespace); ``packed`` the
operators over packed-channel layouts (``layout_transform``, ``nn.conv2d_nchwc``...) and
``winograd`` the transforms of Winograd convolutions on them; ``qnn``
the quantization operators (``qnn.quantize``, ``qnn.requantize``...); ``annotation`` the
region markers of external codegens; ``grad_ops``
the operators only gradients use (``nn.max_pool2d_grad``, ``take_grad``...); ``relations``
holds the type-relation helpers operator definitions share (broadcasting, reductions,
windows, layouts); ``lowering`` the lowerings to the op library's tensor expressions.

A new namespace is a module here that registers its operators and sets
``__getattr__ = namespace_getattr("<namespace>")``, imported below.
"""

from __future__ import annotations

from . import (
    annotation,
    grad_ops,
    lowering,
    nn,
    packed,
    qnn,
    relations,
    tensor,
    transform,
    winograd,
)
from ._make import make_call, namespace_getattr, namespace_ops, op_builder

__getattr__ = namespace_getattr("")


def __dir__() -> list[str]:
    return sorted({*namespace_ops(""), "annotation", "grad_ops", "lowering", "nn", "packed", "qnn",
                   "relations", "tensor", "transform", "winograd", "make_call", "namespace_getattr",
                   "namespace_ops", "op_builder"})


__all__ = ["annotation", "grad_ops", "lowering", "make_call", "namespace_getattr",
           "namespace_ops", "nn", "op_builder", "packed", "qnn", "relations", "tensor",
           "transform", "winograd"]
