"""Data layouts with packed (blocked) axes, and ``layout_transform`` between them.

A layout names a tensor's axes in order: an upper-case letter is a *primal* axis (``N``,
``C``, ``H``, ``W``...), a number and a lower-case letter is a *block* of the primal axis of
that letter. ``NCHW16c`` has shape ``(N, C/16, H, W, 16)``: element ``(n, c, h, w)`` of the
``NCHW`` tensor sits at ``(n, c // 16, h, w, c % 16)``. Packing the channels this way lets a
convolution load 16 output channels as one vector (and broadcast one input value across
them), whatever its stride or image size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import te
from ..tensor import Tensor
from . import tags

_TOKEN = re.compile(r"([A-Z])|([0-9]+)([a-z])")


@dataclass(frozen=True)
class Layout:
    """A parsed layout: ``axes`` in order, each ``(letter, block)`` with ``block`` None for
    a primal axis (upper case) and the block size for a sub-axis (lower case)."""

    name: str
    axes: tuple[tuple[str, int | None], ...]

    @classmethod
    def parse(cls, name: str) -> Layout:
        """Parse ``name``; ``ValueError`` says what is wrong with it."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"layout {name!r} is not a non-empty string")
        axes: list[tuple[str, int | None]] = []
        pos = 0
        while pos < len(name):
            m = _TOKEN.match(name, pos)
            if m is None:
                raise ValueError(f"layout {name!r}: unexpected {name[pos:]!r} (axes are "
                                 "upper-case letters, blocks a number and a lower-case "
                                 "letter, as in NCHW16c)")
            if m.group(1):
                axes.append((m.group(1), None))
            else:
                block = int(m.group(2))
                if block < 1:
                    raise ValueError(f"layout {name!r}: block {m.group(0)!r} must be >= 1")
                axes.append((m.group(3), block))
            pos = m.end()
        letters = [a for a, _ in axes]
        if len(set(letters)) != len(letters):
            raise ValueError(f"layout {name!r} names an axis twice")
        for letter, block in axes:
            if block is not None and letter.upper() not in letters:
                raise ValueError(f"layout {name!r}: block {block}{letter} has no primal axis "
                                 f"{letter.upper()}")
        return cls(name, tuple(axes))

    @property
    def primal(self) -> str:
        """The primal axes in order (``NCHW`` for ``NCHW16c``)."""
        return "".join(a for a, b in self.axes if b is None)

    def block(self, letter: str) -> int | None:
        """The block size of primal axis ``letter`` (None when it is not blocked)."""
        return dict(self.axes).get(letter.lower())

    def shape(self, extents: dict[str, int]) -> tuple[int, ...]:
        """The shape of a tensor whose primal axes have ``extents``; ``ValueError`` when a
        blocked axis is not a multiple of its block."""
        shape = []
        for letter, block in self.axes:
            if block is None:
                inner = self.block(letter)
                if inner is not None and extents[letter] % inner:
                    raise ValueError(f"layout {self.name}: axis {letter} of extent "
                                     f"{extents[letter]} is not a multiple of {inner}")
                shape.append(extents[letter] // (inner or 1))
            else:
                shape.append(block)
        return tuple(shape)

    def extents(self, shape: tuple[int, ...]) -> dict[str, int]:
        """The primal extents of a tensor of ``shape`` in this layout."""
        if len(shape) != len(self.axes):
            raise ValueError(f"layout {self.name} has {len(self.axes)} axes, the shape "
                             f"{list(shape)} has {len(shape)}")
        return {a: d * (self.block(a) or 1) for (a, b), d in zip(self.axes, shape, strict=True)
                if b is None}


def check_pair(src: Layout, dst: Layout) -> None:
    """``ValueError`` unless ``src`` and ``dst`` have the same primal axes."""
    if sorted(src.primal) != sorted(dst.primal):
        raise ValueError(f"layout_transform: {src.name} and {dst.name} do not have the same "
                         "primal axes")


def layout_transform(data: Tensor, src: str, dst: str,
                     name: str = "T_layout_trans") -> Tensor:
    """``data`` (in layout ``src``) in layout ``dst`` (an injective stage)."""
    s, d = Layout.parse(src), Layout.parse(dst)
    check_pair(s, d)
    shape = d.shape(s.extents(tuple(data.shape)))

    def body(*idx: te.Var) -> te.Expr:
        at = {a: i for (a, _), i in zip(d.axes, idx, strict=True)}
        value = {}
        for letter in d.primal:
            block = d.block(letter)
            value[letter] = (at[letter] if block is None
                             else at[letter] * block + at[letter.lower()])
        src_idx = []
        for letter, block in s.axes:
            if block is not None:
                src_idx.append(value[letter.upper()] % block)
            else:
                inner = s.block(letter)
                src_idx.append(value[letter] if inner is None else value[letter] // inner)
        return data[tuple(src_idx)]

    return te.compute(shape, body, name=name, tag=tags.make(tags.INJECTIVE, "layout_transform"))

