"""Annotation operators of the bring-your-own-codegen flow (``ir.transform.partition``):
``annotation.compiler_begin(x, compiler, region)`` marks a value entering a region that an
external codegen ``compiler`` runs, ``annotation.compiler_end(x, compiler, region)`` one
leaving it (``region`` -1: not assigned yet). Both are the identity on their value; they
exist only between ``AnnotateTarget`` and ``PartitionGraph``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..attrs import Attrs
from ..op_registry import OpDef, OpPattern, register_op
from ..types import Type
from ._make import namespace_getattr, namespace_ops


def _identity_relation(types: Sequence[Type], attrs: Attrs) -> Type:
    return types[0]


for _name, _doc in (("compiler_begin", "entering"), ("compiler_end", "leaving")):
    register_op(OpDef(
        name=f"annotation.{_name}", num_inputs=1,
        attrs_schema={"compiler": (str, "default"), "region": (int, -1)},
        type_relation=_identity_relation, pattern=OpPattern.OPAQUE,
        compute=lambda args, attrs: np.asarray(args[0]),
        doc=f"The identity, marking a value {_doc} a region of external codegen "
            "``compiler``."))

__getattr__ = namespace_getattr("annotation")


def __dir__() -> list[str]:
    return namespace_ops("annotation")
