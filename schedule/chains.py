"""Reduction chains: a serial loop ``acc = acc op part[base + k]`` folding a buffer's parts
into one element (the last step of a factored reduction, a row's max or sum).

In order, such a loop is a dependent chain of n operations. Both ways it can reach the code
generator combine the parts pairwise instead, log2(n) steps deep: rolled, the C code
generator prints it as a call of a tree helper; unrolled, ``pairwise`` builds the same tree
as one expression of the parts, so their constant indices still let them live in registers.
Sums are re-associated (pairwise: no less accurate than in order); max and min are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arith import linear, simplify
from .expr import Binary, Const, Expr, Load, free_vars, substitute
from .loop_ir import For, Store
from .vectorize import split_vector_dtype

#: the operators a chain may combine parts with
CHAIN_OPS = ("+", "max", "min")
#: chains shorter than this stay as they are: the tree would save little
MIN_CHAIN_PARTS = 8


@dataclass(frozen=True)
class Chain:
    """``store``'s element becomes ``acc op part`` for every k of ``loop``."""

    loop: For
    store: Store
    acc: Load
    part: Load

    @property
    def op(self) -> str:
        return self.store.value.op

    @property
    def parts(self) -> int:
        return int(self.loop.extent.value)

    def contiguous_base(self) -> Expr | None:
        """Where the parts start if they lie one after another in a flat buffer (the C tree
        helper reads them through a pointer); None otherwise."""
        k = self.loop.var
        if len(self.part.indices) != 1:
            return None
        lin = linear(self.part.indices[0])
        if lin is None or lin.terms.get(k.key()) != 1 or any(
                k in free_vars(atom) for key, atom in lin.atoms.items() if key != k.key()):
            return None
        return substitute(self.part.indices[0], {k: Const(0, k.dtype)})


def reduction_chain(s: For) -> Chain | None:
    """The chain ``s`` is, or None: a loop of constant extent of at least
    ``MIN_CHAIN_PARTS`` whose whole body stores ``acc op part`` into the element ``acc``
    reads, one scalar of a non-bool type, ``part`` a read of another buffer."""
    store, extent = s.body, s.extent
    if not (isinstance(extent, Const) and extent.value >= MIN_CHAIN_PARTS
            and isinstance(store, Store) and isinstance(store.value, Binary)
            and store.value.op in CHAIN_OPS and store.value.dtype != "bool"
            and split_vector_dtype(store.value.dtype)[1] == 1):
        return None
    acc, part = store.value.a, store.value.b
    if store.value.op == "+" and isinstance(part, Load) and part.source is store.buffer:
        acc, part = part, acc
    if not (isinstance(acc, Load) and acc.source is store.buffer
            and [i.key() for i in acc.indices] == [i.key() for i in store.indices]
            and not any(s.var in free_vars(i) for i in store.indices)
            and isinstance(part, Load) and part.source is not store.buffer
            and part.dtype == store.value.dtype):
        return None
    return Chain(s, store, acc, part)


def pairwise(chain: Chain) -> Store:
    """The chain unrolled as one store of ``acc op tree``, the tree combining part i with
    part i + h, halves of the parts at a time (the C tree helper's order)."""
    var, dtype = chain.loop.var, chain.store.value.dtype
    terms: list[Expr] = [
        Load(chain.part.source,
             tuple(simplify(substitute(i, {var: Const(k, var.dtype)}))
                   for i in chain.part.indices), dtype)
        for k in range(chain.parts)]
    while len(terms) > 1:
        half = (len(terms) + 1) // 2
        terms = [Binary(chain.op, terms[i], terms[i + half], dtype)
                 if i + half < len(terms) else terms[i] for i in range(half)]
    return Store(chain.store.buffer, chain.store.indices,
                 Binary(chain.op, chain.acc, terms[0], dtype))
