"""The IR's exceptions.

``IRTypeError`` is what a type relation or the type checker raises for an ill-typed program:
its message names the operator or expression and the shapes involved, and its ``span`` (when
known) says where in the source text the offending expression is.
"""

from __future__ import annotations

from .span import Span


class IRTypeError(TypeError):
    """An ill-typed program. ``message`` is the bare explanation; ``str(err)`` prefixes the
    position (``line:column: ``) when ``span`` is known."""

    def __init__(self, message: str, span: Span | None = None):
        super().__init__(message)
        self.message = message
        self.span = span

    def __str__(self) -> str:
        return f"{self.span}: {self.message}" if self.span is not None else self.message

    def with_span(self, span: Span | None) -> IRTypeError:
        """This error located at ``span`` (unchanged when it already has a position or
        ``span`` is None): the type checker calls it on errors raised by relations, which
        do not know where their call is."""
        if self.span is not None or span is None:
            return self
        err = IRTypeError(self.message, span)
        err.__cause__ = self.__cause__
        return err
