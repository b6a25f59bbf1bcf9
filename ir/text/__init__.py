"""The IR's text format: Relay's text format, version 0.0.5, read and written.

- ``astext(module_or_expr)`` (also ``str(module)``) prints; ``parse(text) -> Module`` and
  ``parse_expr(text) -> Expr`` read; ``parse(astext(m)) == m`` (structurally).
- Errors are ``ParseError`` (a ValueError): ``"3:14: expected ')' after the arguments of
  nn.dense, found ';'"``, with ``line`` / ``column`` attributes.

Where this format differs from Relay's (see ``printer`` and ``parser``):

- The ``#[metadata]`` section after the program is this project's JSON, not TVM's:
  ``{"relay.Constant": [{"dtype": "float32", "shape": [3], "data": "<base64>"}]}`` (the
  little-endian bytes of the array). ``meta[relay.Constant][i]`` refers to entry ``i``.
  Rank-0 constants print inline as literals (NaN and unusual dtypes use the table).
- Float attribute values print as ``0.5f`` (Relay's float32 suffix) but keep the full
  double precision of the Python float (``repr``); ``inff`` / ``-inff`` / ``nanf`` spell
  infinities and NaN.
- A ``let`` (or any block) in operand position prints as a braced block ``{ let %x = ...;
  %x }``; the parser also reads Relay's parenthesised ``(let %x = ...; %x)``.
- Types: ``ref(T)`` is a reference type, ``_`` an incomplete type (a fresh one each time),
  ``fn [A](A) -> A`` a polymorphic function type; an ADT without type parameters applied
  to no arguments prints as ``Name[]`` when it is a ``TypeCall``.
- Not printed (as in Relay): checked types, the ``type_args`` of calls (type inference
  fills both again) and type constraints of function types; operator attributes equal to
  the operator's defaults are left out (the parser fills them in again).
- Variables are renamed where needed: name hints are made identifiers and unique within
  a global function (``%x``, ``%x1``); structural equality ignores names.
"""

from .lexer import ParseError
from .parser import parse, parse_expr
from .printer import astext

__all__ = ["ParseError", "astext", "parse", "parse_expr"]
