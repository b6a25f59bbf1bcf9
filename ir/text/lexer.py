"""The tokenizer of the IR text format, and ``ParseError``.

``tokenize(text)`` returns the tokens of the program part of ``text`` and the text of its
``#[metadata]`` section (everything after a line holding only ``#[metadata]``), or None.
Comments (``// ...`` to the end of the line, ``/* ... */``, nested) and whitespace are
skipped. Every token knows its 1-based line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class ParseError(ValueError):
    """A text program that does not parse: ``str(err)`` is ``"line:column: message"``
    (with the source name in front when known). ``line``, ``column`` and ``message`` are
    attributes too."""

    def __init__(self, message: str, line: int, column: int, source: str | None = None):
        self.message = message
        self.line = line
        self.column = column
        self.source = source
        prefix = f"{source}:" if source else ""
        super().__init__(f"{prefix}{line}:{column}: {message}")


# Token kinds.
LOCAL = "local"  # %x           (value: the name)
GRAPH = "graph"  # %0           (value: the name, digits)
GLOBAL = "global"  # @f         (value: the name)
IDENT = "ident"  # nn.conv2d, Cons, float32, let ...
NUMBER = "number"  # 1, 1.5f, -2i64 (value: (digits, suffix))
STRING = "string"  # "NCHW"     (value: the decoded string)
PUNCT = "punct"  # ( ) [ ] { } , ; : = => -> . ?
HEADER = "header"  # #[version = "0.0.5"] (value: the text between the brackets)
EOF = "eof"


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    line: int
    column: int
    value: object = None

    def describe(self) -> str:
        """The token as error messages quote it."""
        if self.kind == EOF:
            return "the end of the text"
        return f"'{self.text}'"


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN_RE = re.compile(
    rf"""
    (?P<ws>[ \t\r\n]+)
  | (?P<lcomment>//[^\n]*)
  | (?P<bcomment>/\*)
  | (?P<header>\#\[[^\]\n]*\])
  | (?P<local>%{_NAME})
  | (?P<graph>%[0-9]+)
  | (?P<global>@{_NAME})
  | (?P<number>-?(?:inf|nan)(?:f16|f32|f64|f)(?![A-Za-z0-9_])
      | -?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?:[iu][0-9]+|f(?:16|32|64)?)?(?![A-Za-z0-9_]))
  | (?P<ident>{_NAME}(?:\.{_NAME})*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<punct>=>|->|[()\[\]{{}},;:=.?])
    """,
    re.VERBOSE,
)
_NUM_SPLIT = re.compile(r"^(-?(?:inf|nan|[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?))(.*)$")
_METADATA_HEADER = "#[metadata]"


def _string_value(text: str, line: int, column: int) -> str:
    import json

    try:
        return json.loads(text)
    except ValueError:
        raise ParseError(f"bad escape in string literal {text}", line, column) from None


def tokenize(text: str, source: str | None = None) -> tuple[list[Token], str | None]:
    """The tokens of ``text`` (ending with an EOF token) and its metadata text or None."""
    tokens: list[Token] = []
    pos, line, line_start = 0, 1, 0
    n = len(text)
    metadata: str | None = None
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        column = pos - line_start + 1
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r}", line, column, source)
        kind = m.lastgroup
        tok_text = m.group()
        if kind == "bcomment":
            depth, i = 1, pos + 2
            while depth and i < n:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            if depth:
                raise ParseError("unterminated comment '/*'", line, column, source)
            tok_text = text[pos:i]
        elif kind == "header" and tok_text.replace(" ", "") == _METADATA_HEADER:
            metadata = text[m.end():]
            break
        elif kind not in ("ws", "lcomment"):
            value: object = None
            if kind in ("local", "graph", "global"):
                value = tok_text[1:]
            elif kind == "number":
                num = _NUM_SPLIT.match(tok_text)
                value = (num.group(1), num.group(2))
            elif kind == "string":
                value = _string_value(tok_text, line, column)
            elif kind == "header":
                value = tok_text[2:-1].strip()
            tokens.append(Token(kind, tok_text, line, column, value))
        newlines = tok_text.count("\n")
        if newlines:
            line += newlines
            line_start = pos + tok_text.rfind("\n") + 1
        pos += len(tok_text)
    tokens.append(Token(EOF, "", line, pos - line_start + 1))
    return tokens, metadata
