"""Source positions: where in a text program an IR node came from (for error messages).

A ``Span`` never takes part in structural equality or hashing: two programs that differ only
in layout are equal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """A position in a source text: 1-based ``line`` and ``column``, and the source's name
    (a file name, or None for a string)."""

    line: int
    column: int
    source: str | None = None

    def __str__(self) -> str:
        prefix = f"{self.source}:" if self.source else ""
        return f"{prefix}{self.line}:{self.column}"
