"""What the C and the GPU code generators share: unique C identifiers for variables and
buffers, indented lines, and the statements both print alike (branches)."""

from __future__ import annotations

from collections.abc import Set

from .expr import Expr, Var
from .loop_ir import Buffer, IfThenElse, Stmt, StmtVisitor


class SourcePrinter(StmtVisitor):
    """A statement printer emitting C-like lines at ``indent``; a subclass prints the
    expressions (``expr``) and the statements its language spells its own way."""

    def __init__(self, reserved: Set[str]):
        self.reserved = reserved
        self.names: dict[int, str] = {}
        self.used_names: set[str] = set()
        self.lines: list[str] = []
        self.indent = 1

    def name(self, obj: Var | Buffer, hint: str) -> str:
        """A C identifier for ``obj``, the same on every call, unique in the program and
        none of the reserved words (or the generator's own ``tt_`` names)."""
        key = id(obj)
        if key not in self.names:
            base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in hint) or "v"
            if base[0].isdigit() or base in self.reserved or base.startswith("tt_"):
                base = f"v_{base}"
            name, n = base, 1
            while name in self.used_names:
                name, n = f"{base}_{n}", n + 1
            self.used_names.add(name)
            self.names[key] = name
        return self.names[key]

    def expr(self, e: Expr) -> str:
        raise NotImplementedError

    def emit(self, text: str, depth: int = 0) -> None:
        """A line at the current indent (``depth`` levels further in)."""
        self.lines.append(f"{'  ' * (self.indent + depth)}{text}")

    def nested(self, s: Stmt, depth: int = 1) -> None:
        """The lines of ``s``, ``depth`` levels further in."""
        self.indent += depth
        self.visit(s)
        self.indent -= depth

    def visit_if(self, s: IfThenElse) -> None:
        self.emit(f"if ({self.expr(s.cond)}) {{")
        self.nested(s.then_body)
        if s.else_body is not None:
            self.emit("} else {")
            self.nested(s.else_body)
        self.emit("}")
