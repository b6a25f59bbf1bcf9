"""The parser of the IR text format: a hand-written recursive-descent parser over the
tokens of ``ir.text.lexer``.

``parse(text) -> Module`` reads a program (type definitions and ``def`` s, in any order:
a first pass collects the names of globals and types, so functions may be mutually
recursive and use types defined further down); ``parse_expr(text) -> Expr`` reads one
expression. Both read everything ``astext`` writes and hand-written Relay 0.0.5 programs.
Nodes carry their ``Span`` (line, column). Errors are ``ParseError`` s (ValueErrors) with
the line, the column and what was expected.

Depth: let sequences and ``%n = ...;`` bindings are read by a loop, so a chain of any
length parses; other constructs nest with brackets, and more than ``MAX_DEPTH`` nested
brackets is a ParseError (checked before parsing), never a RecursionError.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np

from ..expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Op,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ..module import Module
from ..span import Span
from ..types import (
    Any,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    SymDim,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeVar,
)
from .lexer import (
    EOF,
    GLOBAL,
    GRAPH,
    HEADER,
    IDENT,
    LOCAL,
    NUMBER,
    PUNCT,
    STRING,
    ParseError,
    Token,
    tokenize,
)
from .printer import MAX_DEPTH, recursion_room

_DTYPE = re.compile(r"(?:u?int(?:8|16|32|64)|float(?:16|32|64)|bfloat16|bool)(?:x[0-9]+)?\Z")
_OPEN = {"(": ")", "[": "]", "{": "}"}
_KEYWORDS = frozenset({"let", "fn", "if", "else", "match", "def", "type", "meta", "ref",
                       "ref_read", "ref_write", "True", "False"})
_INT_SUFFIX = {"": "int32", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
               "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}
_FLOAT_SUFFIX = {"f": "float32", "f16": "float16", "f32": "float32", "f64": "float64"}
#: Metadata sections larger than this (characters) are refused.
MAX_METADATA_CHARS = 1 << 30


def _check_depth(tokens: list[Token], source: str | None) -> None:
    depth = 0
    for tok in tokens:
        if tok.kind == PUNCT:
            if tok.text in _OPEN:
                depth += 1
                if depth > MAX_DEPTH:
                    raise ParseError(f"expressions nested deeper than {MAX_DEPTH} brackets "
                                     "are not supported (bind intermediate results with "
                                     "let)", tok.line, tok.column, source)
            elif tok.text in (")", "]", "}"):
                depth -= 1


def _decode_metadata(text: str | None, line: int, source: str | None) -> dict[str, list]:
    if text is None or not text.strip():
        return {}
    if len(text) > MAX_METADATA_CHARS:
        raise ParseError("the metadata section is too large", line, 1, source)
    from ..serialize import decode_array

    try:
        table = json.loads(text)
        if not isinstance(table, dict):
            raise ValueError("it is not a JSON object")
        out: dict[str, list] = {}
        for key, entries in table.items():
            if key != "relay.Constant":
                raise ValueError(f"unknown metadata kind {key!r} (only relay.Constant)")
            if not isinstance(entries, list):
                raise ValueError(f"{key} must be a list")
            out[key] = [Constant(decode_array(entry)) for entry in entries]
        return out
    except (ValueError, TypeError, RecursionError) as err:
        raise ParseError(f"bad #[metadata] section: {err}", line, 1, source) from None


class _Parser:
    def __init__(self, text: str, source: str | None, module: Module | None = None):
        self.source = source
        self.tokens, meta_text = tokenize(text, source)
        self.meta = _decode_metadata(meta_text, self.tokens[-1].line, source)
        _check_depth(self.tokens, source)
        self.pos = 0
        self.scopes: list[dict[str, Expr]] = []
        self.tscopes: list[dict[str, TypeVar]] = []
        self.globals: dict[str, GlobalVar] = {}
        self.types: dict[str, GlobalTypeVar] = {}
        self.ctors: dict[str, Constructor] = {}
        if module is not None:
            self.globals.update((gv.name, gv) for gv in module.functions)
            self.types.update((t.name, t) for t in module.type_definitions)
            for data in module.type_definitions.values():
                self.ctors.update((c.name, c) for c in data.constructors)

    # ------------------------------------------------------------------------- tokens

    def peek(self, k: int = 0) -> Token:
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind != EOF:
            self.pos += 1
        return tok

    def error(self, tok: Token, message: str) -> ParseError:
        return ParseError(message, tok.line, tok.column, self.source)

    def span(self, tok: Token) -> Span:
        return Span(tok.line, tok.column, self.source)

    def is_punct(self, text: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok.kind == PUNCT and tok.text == text

    def is_word(self, text: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok.kind == IDENT and tok.text == text

    def accept(self, text: str) -> bool:
        if self.is_punct(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str, context: str) -> Token:
        tok = self.peek()
        if tok.kind == PUNCT and tok.text == text:
            return self.next()
        raise self.error(tok, f"expected '{text}' {context}, found {tok.describe()}")

    def expect_word(self, text: str, context: str) -> Token:
        tok = self.peek()
        if tok.kind == IDENT and tok.text == text:
            return self.next()
        raise self.error(tok, f"expected '{text}' {context}, found {tok.describe()}")

    def expect_kind(self, kind: str, what: str, context: str) -> Token:
        tok = self.peek()
        if tok.kind == kind:
            return self.next()
        raise self.error(tok, f"expected {what} {context}, found {tok.describe()}")

    def skip_header(self) -> None:
        while self.peek().kind == HEADER:
            tok = self.next()
            m = re.fullmatch(r'version\s*=\s*"([^"]*)"', tok.value)
            if m is None:
                raise self.error(tok, f"unknown header {tok.text} (expected "
                                      '#[version = "0.0.5"])')
            if m.group(1) not in ("0.0.4", "0.0.5"):
                raise self.error(tok, f"unsupported text format version {m.group(1)} "
                                      "(this parser reads 0.0.5)")

    # ------------------------------------------------------------------------- module

    def items(self) -> list[tuple[str, int]]:
        """The top-level items (``type`` / ``def``) and where they start: a scan that
        skips each item's brackets (the parse proper reports malformed items)."""
        items, pos, n = [], self.pos, len(self.tokens)
        while self.tokens[pos].kind != EOF:
            tok = self.tokens[pos]
            if tok.kind != IDENT or tok.text not in ("def", "type"):
                raise self.error(tok, "expected 'def', 'type' or the end of the text, "
                                      f"found {tok.describe()}")
            items.append((tok.text, pos))
            depth, pos, opened = 0, pos + 1, False
            while pos < n - 1:
                t = self.tokens[pos]
                if t.kind == PUNCT and t.text in _OPEN:
                    opened = opened or (t.text == "{" and depth == 0)
                    depth += 1
                elif t.kind == PUNCT and t.text in (")", "]", "}"):
                    depth -= 1
                    if depth <= 0 and opened and t.text == "}":
                        pos += 1
                        break
                elif t.kind == IDENT and t.text in ("def", "type") and depth <= 0:
                    break
                pos += 1
        return items

    def parse_module(self) -> Module:
        self.skip_header()
        items = self.items()
        for kind, start in items:
            name_tok = self.tokens[start + 1]
            if kind == "def":
                if name_tok.kind != GLOBAL:
                    raise self.error(name_tok, "expected a global name (@f) after 'def', "
                                               f"found {name_tok.describe()}")
                if name_tok.value in self.globals:
                    raise self.error(name_tok, f"global @{name_tok.value} is defined twice")
                self.globals[name_tok.value] = GlobalVar(name_tok.value, self.span(name_tok))
            else:
                if name_tok.kind != IDENT or name_tok.text in _KEYWORDS:
                    raise self.error(name_tok, "expected a type name after 'type', found "
                                               f"{name_tok.describe()}")
                if name_tok.text in self.types:
                    raise self.error(name_tok, f"type {name_tok.text} is defined twice")
                self.types[name_tok.text] = GlobalTypeVar(name_tok.text)
        mod = Module()
        for kind, start in items:
            if kind == "type":
                self.pos = start
                data = self.parse_type_def()
                mod.add_type(data)
                self.expect_item_end()
        for kind, start in items:
            if kind == "def":
                self.pos = start
                gv, fn = self.parse_def()
                mod.add(gv, fn)
                self.expect_item_end()
        return mod

    def expect_item_end(self) -> None:
        tok = self.peek()
        if tok.kind != EOF and not (tok.kind == IDENT and tok.text in ("def", "type")):
            raise self.error(tok, "expected 'def', 'type' or the end of the text, found "
                                  f"{tok.describe()}")

    def parse_type_def(self) -> TypeData:
        self.expect_word("type", "")
        name_tok = self.next()
        header = self.types[name_tok.text]
        self.tscopes.append({})
        try:
            tvars = self.type_param_list() if self.is_punct("[") else []
            self.expect("{", f"to open the constructors of type {header.name}")
            ctors: list[Constructor] = []
            seen: set[str] = set()
            while not self.is_punct("}"):
                tok = self.expect_kind(IDENT, "a constructor name",
                                       f"in the definition of type {header.name}")
                if tok.text in seen or tok.text in self.ctors:
                    raise self.error(tok, f"constructor {tok.text} is defined twice")
                inputs: list[Type] = []
                if self.accept("("):
                    while not self.is_punct(")"):
                        inputs.append(self.parse_type())
                        if not self.accept(","):
                            break
                    self.expect(")", f"after the fields of constructor {tok.text}")
                ctors.append(Constructor(tok.text, inputs, header, len(ctors),
                                         self.span(tok)))
                seen.add(tok.text)
                if not self.accept(","):
                    break
            self.expect("}", f"after the constructors of type {header.name}")
        finally:
            self.tscopes.pop()
        self.ctors.update((c.name, c) for c in ctors)
        return TypeData(header, tvars, ctors)

    def parse_def(self) -> tuple[GlobalVar, Function]:
        start = self.expect_word("def", "")
        name_tok = self.next()
        gv = self.globals[name_tok.value]
        return gv, self.parse_function_rest(start, f"@{gv.name}")

    # -------------------------------------------------------------------------- types

    def type_param_list(self) -> list[TypeVar]:
        self.expect("[", "to open the type parameters")
        out: list[TypeVar] = []
        while not self.is_punct("]"):
            tok = self.expect_kind(IDENT, "a type parameter name", "in '[...]'")
            tv = TypeVar(tok.text)
            self.tscopes[-1][tok.text] = tv
            out.append(tv)
            if not self.accept(","):
                break
        self.expect("]", "after the type parameters")
        return out

    def lookup_type_var(self, name: str) -> TypeVar | None:
        for scope in reversed(self.tscopes):
            if name in scope:
                return scope[name]
        return None

    def parse_type(self) -> Type:
        tok = self.next()
        if tok.kind == PUNCT and tok.text == "(":
            fields: list[Type] = []
            trailing = False
            while not self.is_punct(")"):
                fields.append(self.parse_type())
                trailing = self.accept(",")
                if not trailing:
                    break
            self.expect(")", "to close the tuple type")
            if len(fields) == 1 and not trailing:
                return fields[0]
            return TupleType(fields)
        if tok.kind != IDENT:
            raise self.error(tok, f"expected a type, found {tok.describe()}")
        name = tok.text
        if name == "fn":
            self.tscopes.append({})
            try:
                params = self.type_param_list() if self.is_punct("[") else []
                self.expect("(", "to open the argument types of a function type")
                args: list[Type] = []
                while not self.is_punct(")"):
                    args.append(self.parse_type())
                    if not self.accept(","):
                        break
                self.expect(")", "after the argument types of a function type")
                self.expect("->", "and a return type after a function type's arguments")
                ret = self.parse_type()
            finally:
                self.tscopes.pop()
            return FuncType(args, ret, params)
        if name == "Tensor":
            self.expect("[", "after 'Tensor'")
            shape = self.parse_shape()
            self.expect(",", "between a tensor type's shape and dtype")
            dt = self.expect_kind(IDENT, "a dtype", "in a tensor type")
            if not _DTYPE.match(dt.text):
                raise self.error(dt, f"unknown dtype {dt.text!r}")
            self.expect("]", "to close the tensor type")
            return TensorType(shape, dt.text)
        if name == "ref" and self.is_punct("("):
            self.next()
            value = self.parse_type()
            self.expect(")", "to close 'ref('")
            return RefType(value)
        if name == "_":
            return IncompleteType.fresh()
        tv = self.lookup_type_var(name)
        if tv is not None:
            return tv
        gtv = self.types.get(name)
        if gtv is not None:
            if not self.accept("["):
                return gtv
            args = []
            while not self.is_punct("]"):
                args.append(self.parse_type())
                if not self.accept(","):
                    break
            self.expect("]", f"after the type arguments of {name}")
            return TypeCall(gtv, args)
        if _DTYPE.match(name):
            return TensorType((), name)
        raise self.error(tok, f"unknown type {name!r}")

    def parse_shape(self) -> tuple:
        self.expect("(", "to open a tensor type's shape")
        dims: list = []
        while not self.is_punct(")"):
            tok = self.next()
            if tok.kind == NUMBER and tok.value[1] == "" and tok.value[0].isdigit():
                dims.append(int(tok.value[0]))
            elif tok.kind == PUNCT and tok.text == "?":
                dims.append(Any)
            elif tok.kind == IDENT and tok.text not in _KEYWORDS:
                dims.append(SymDim(tok.text))
            else:
                raise self.error(tok, "expected a dimension (an integer, '?' or a name), "
                                      f"found {tok.describe()}")
            if not self.accept(","):
                break
        self.expect(")", "to close a tensor type's shape")
        return tuple(dims)

    # -------------------------------------------------------------------- expressions

    def lookup_var(self, tok: Token) -> Expr:
        for scope in reversed(self.scopes):
            e = scope.get(tok.text)
            if e is not None:
                return e
        raise self.error(tok, f"undefined variable {tok.text}")

    def parse_block(self, close: str, opened: Token | None) -> Expr:
        """Statements (``let %x = e;``, ``%0 = e;``) and a result, up to ``close`` (a
        punctuation, or EOF): a loop, however long the chain."""
        scope: dict[str, Expr] = {}
        self.scopes.append(scope)
        lets: list[tuple[Var, Expr, Span]] = []
        try:
            while True:
                tok = self.peek()
                if tok.kind == IDENT and tok.text == "let":
                    self.next()
                    vtok = self.expect_kind(LOCAL, "a variable (%x)", "after 'let'")
                    ann = self.parse_type() if self.accept(":") else None
                    var = Var(vtok.value, ann, self.span(vtok))
                    self.expect("=", f"after 'let {vtok.text}'")
                    if self.is_word("fn"):
                        scope[vtok.text] = var  # a function may call itself
                    value = self.parse_expr()
                    self.expect(";", f"after the value of 'let {vtok.text}'")
                    scope[vtok.text] = var
                    lets.append((var, value, self.span(tok)))
                elif tok.kind == GRAPH and self.is_punct("=", 1):
                    self.next()
                    self.next()
                    value = self.parse_expr()
                    self.expect(";", f"after the value of {tok.text}")
                    scope[tok.text] = value
                else:
                    break
            body = self.parse_expr()
        finally:
            self.scopes.pop()
        if close == EOF:
            tok = self.peek()
            if tok.kind != EOF:
                raise self.error(tok, f"expected the end of the text, found {tok.describe()}")
        else:
            where = f" opened at {opened.line}:{opened.column}" if opened else ""
            self.expect(close, f"to close the block{where}")
        for var, value, span in reversed(lets):
            body = Let(var, value, body, span)
        return body

    def parse_expr(self) -> Expr:
        start = self.peek()
        e = self.parse_primary()
        while True:
            if self.is_punct("("):
                e = self.parse_call(e, start)
            elif self.is_punct("."):
                self.next()
                tok = self.expect_kind(NUMBER, "a tuple index", "after '.'")
                digits, suffix = tok.value
                parts = digits.split(".")
                if suffix or not all(p.isdigit() for p in parts):
                    raise self.error(tok, f"expected a tuple index, found {tok.describe()}")
                for p in parts:
                    e = TupleGetItem(e, int(p), self.span(tok))
            else:
                return e

    def describe_callee(self, e: Expr) -> str:
        if isinstance(e, Op | Constructor):
            return e.name
        if isinstance(e, GlobalVar):
            return "@" + e.name
        if isinstance(e, Var):
            return "%" + e.name_hint
        return "the call"

    def parse_call(self, callee: Expr, start: Token) -> Call:
        what = self.describe_callee(callee)
        self.expect("(", "")
        args: list[Expr] = []
        attrs: dict[str, object] = {}
        while not self.is_punct(")"):
            tok = self.peek()
            if tok.kind == IDENT and self.is_punct("=", 1):
                self.next()
                self.next()
                if tok.text in attrs:
                    raise self.error(tok, f"attribute {tok.text} given twice")
                attrs[tok.text] = self.parse_attr_value()
            else:
                if attrs:
                    raise self.error(tok, f"{what}: arguments must come before attributes")
                args.append(self.parse_expr())
            if not self.accept(","):
                break
        self.expect(")", f"after the arguments of {what}")
        if isinstance(callee, Op) and callee.name == "nn.pad" and len(args) == 2:
            self.move_pad_value(args, attrs, start)
        try:
            return Call(callee, args, attrs or None, span=self.span(start))
        except (TypeError, ValueError) as err:
            raise self.error(start, str(err)) from None

    def move_pad_value(self, args: list[Expr], attrs: dict[str, object], start: Token) -> None:
        """TVM >= 0.8 writes ``nn.pad(%x, 0f, pad_width=...)`` (the value an input); here
        it is the ``pad_value`` attribute (Relay's older form), so a scalar constant moves
        there. Printing gives the attribute form."""
        value = args.pop()
        if not isinstance(value, Constant) or value.data.ndim != 0 or "pad_value" in attrs:
            raise self.error(start, "nn.pad: the pad value must be a scalar constant (given "
                             "either as the second argument or as pad_value=..., not both)")
        attrs["pad_value"] = float(value.data)

    def parse_attr_value(self) -> object:
        tok = self.next()
        if tok.kind == NUMBER:
            digits, suffix = tok.value
            is_float = (suffix.startswith("f") or "." in digits or "e" in digits
                        or "E" in digits or "n" in digits)
            try:
                return float(digits) if is_float else int(digits)
            except ValueError:
                raise self.error(tok, f"bad number {tok.text}") from None
        if tok.kind == STRING:
            return tok.value
        if tok.kind == IDENT and tok.text in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[tok.text]
        if tok.kind == PUNCT and tok.text in ("[", "("):
            close = "]" if tok.text == "[" else ")"
            items = []
            while not self.is_punct(close):
                items.append(self.parse_attr_value())
                if not self.accept(","):
                    break
            self.expect(close, "to close the list")
            return tuple(items)
        raise self.error(tok, "expected an attribute value (a number, a string, True, False, "
                              f"None or a list), found {tok.describe()}")

    def parse_primary(self) -> Expr:
        tok = self.next()
        kind = tok.kind
        if kind == PUNCT:
            if tok.text == "(":
                return self.parse_paren(tok)
            if tok.text == "{":
                return self.parse_block("}", tok)
        elif kind in (LOCAL, GRAPH):
            return self.lookup_var(tok)
        elif kind == GLOBAL:
            if tok.value not in self.globals:
                raise self.error(tok, f"undefined global {tok.text}")
            return GlobalVar(tok.value, self.span(tok))
        elif kind == NUMBER:
            return self.literal(tok)
        elif kind == IDENT:
            name = tok.text
            if name in ("True", "False"):
                return Constant(np.array(name == "True"), self.span(tok))
            if name == "fn":
                return self.parse_function_rest(tok, "fn")
            if name == "if":
                return self.parse_if(tok)
            if name == "match":
                return self.parse_match(tok)
            if name in ("ref", "ref_read", "ref_write") and self.is_punct("("):
                return self.parse_ref(tok)
            if name == "meta" and self.is_punct("["):
                return self.parse_meta(tok)
            if name == "let":
                raise self.error(tok, "'let' starts a block statement: put it first in a "
                                      "block ('{ let %x = ...; %x }')")
            ctor = self.ctors.get(name)
            if ctor is not None:
                return ctor
            if name in Op._table:
                return Op.get(name)
            hint = ""
            try:
                Op.get(name)
            except KeyError as err:
                hint = str(err).strip("\"'")
                hint = hint[hint.find("("):] if "(" in hint else ""
            raise self.error(tok, f"unknown operator or constructor '{name}'"
                                  + (f" {hint}" if hint else ""))
        raise self.error(tok, f"expected an expression, found {tok.describe()}")

    def parse_paren(self, open_tok: Token) -> Expr:
        if self.accept(")"):
            return Tuple([], self.span(open_tok))
        if self.is_word("let") or (self.peek().kind == GRAPH and self.is_punct("=", 1)):
            return self.parse_block(")", open_tok)
        first = self.parse_expr()
        if not self.accept(","):
            self.expect(")", f"to close the '(' at {open_tok.line}:{open_tok.column}")
            return first
        fields = [first]
        while not self.is_punct(")"):
            fields.append(self.parse_expr())
            if not self.accept(","):
                break
        self.expect(")", f"to close the tuple opened at {open_tok.line}:{open_tok.column}")
        return Tuple(fields, self.span(open_tok))

    def literal(self, tok: Token) -> Constant:
        digits, suffix = tok.value
        fractional = any(c in digits for c in ".eEn")
        if suffix == "" and fractional:
            suffix = "f"
        if suffix in _FLOAT_SUFFIX:
            dt = np.dtype(_FLOAT_SUFFIX[suffix])
            with np.errstate(over="ignore"):
                value = np.array(dt.type(digits), dtype=dt)
        elif suffix in _INT_SUFFIX:
            if fractional:
                raise self.error(tok, f"an integer literal has no fraction: {tok.text}")
            dt = np.dtype(_INT_SUFFIX[suffix])
            v = int(digits)
            info = np.iinfo(dt)
            if not info.min <= v <= info.max:
                raise self.error(tok, f"{v} is out of range for {dt}")
            value = np.array(v, dtype=dt)
        else:
            raise self.error(tok, f"unknown literal suffix {suffix!r} in {tok.text}")
        return Constant(value, self.span(tok))

    def parse_meta(self, tok: Token) -> Constant:
        self.expect("[", "after 'meta'")
        kind = self.expect_kind(IDENT, "a metadata kind (relay.Constant)", "in meta[...]")
        self.expect("]", "after the metadata kind")
        self.expect("[", "before the metadata index")
        idx = self.expect_kind(NUMBER, "an index", "in meta[...][...]")
        self.expect("]", "after the metadata index")
        table = self.meta.get(kind.text, [])
        if idx.value[1] or not idx.value[0].isdigit() or int(idx.value[0]) >= len(table):
            raise self.error(tok, f"meta[{kind.text}][{idx.text}] is not in the #[metadata] "
                                  f"section (it holds {len(table)} {kind.text})")
        return table[int(idx.value[0])]

    def parse_ref(self, tok: Token) -> Expr:
        self.expect("(", f"after '{tok.text}'")
        first = self.parse_expr()
        if tok.text == "ref_write":
            self.expect(",", "between the reference and the value of ref_write")
            value = self.parse_expr()
            self.expect(")", "after the arguments of ref_write")
            return RefWrite(first, value, self.span(tok))
        self.expect(")", f"after the argument of {tok.text}")
        cls = RefCreate if tok.text == "ref" else RefRead
        return cls(first, self.span(tok))

    def parse_function_rest(self, start: Token, what: str) -> Function:
        """After ``fn`` (or ``def @f``): type params, params, attrs, return type, body."""
        self.tscopes.append({})
        scope: dict[str, Expr] = {}
        try:
            tparams = self.type_param_list() if self.is_punct("[") else []
            self.expect("(", f"to open the parameters of {what}")
            params: list[Var] = []
            attrs: dict[str, object] = {}
            while not self.is_punct(")"):
                tok = self.peek()
                if tok.kind == IDENT and self.is_punct("=", 1):
                    self.next()
                    self.next()
                    attrs[tok.text] = self.parse_attr_value()
                else:
                    if attrs:
                        raise self.error(tok, f"{what}: parameters must come before "
                                              "attributes")
                    ptok = self.expect_kind(LOCAL, "a parameter (%x)",
                                            f"in the parameters of {what}")
                    if ptok.text in scope:
                        raise self.error(ptok, f"parameter {ptok.text} is declared twice")
                    ann = self.parse_type() if self.accept(":") else None
                    var = Var(ptok.value, ann, self.span(ptok))
                    scope[ptok.text] = var
                    params.append(var)
                if not self.accept(","):
                    break
            self.expect(")", f"after the parameters of {what}")
            ret = self.parse_type() if self.accept("->") else None
            opened = self.expect("{", f"to open the body of {what}")
            self.scopes.append(scope)
            try:
                body = self.parse_block("}", opened)
            finally:
                self.scopes.pop()
        finally:
            self.tscopes.pop()
        try:
            return Function(params, body, ret, tparams, attrs or None, self.span(start))
        except (TypeError, ValueError) as err:
            raise self.error(start, str(err)) from None

    def parse_if(self, tok: Token) -> If:
        self.expect("(", "after 'if'")
        cond = self.parse_expr()
        self.expect(")", "after the condition of 'if'")
        opened = self.expect("{", "to open the true branch of 'if'")
        then = self.parse_block("}", opened)
        self.expect_word("else", "after the true branch of 'if'")
        opened = self.expect("{", "to open the false branch of 'if'")
        other = self.parse_block("}", opened)
        return If(cond, then, other, self.span(tok))

    def parse_match(self, tok: Token) -> Match:
        complete = not self.accept("?")
        self.expect("(", "after 'match'")
        data = self.parse_expr()
        self.expect(")", "after the matched value")
        self.expect("{", "to open the clauses of 'match'")
        clauses: list[Clause] = []
        while not self.is_punct("}"):
            scope: dict[str, Expr] = {}
            lhs = self.parse_pattern(scope)
            self.expect("=>", "after a match pattern")
            self.scopes.append(scope)
            try:
                rhs = self.parse_expr()
            finally:
                self.scopes.pop()
            clauses.append(Clause(lhs, rhs))
            if not self.accept(","):
                break
        self.expect("}", "after the clauses of 'match'")
        return Match(data, clauses, complete, self.span(tok))

    def parse_pattern(self, scope: dict[str, Expr]) -> Pattern:
        tok = self.next()
        if tok.kind == IDENT and tok.text == "_":
            return PatternWildcard()
        if tok.kind == LOCAL:
            if tok.text in scope:
                raise self.error(tok, f"pattern variable {tok.text} is bound twice")
            ann = self.parse_type() if self.accept(":") else None
            var = Var(tok.value, ann, self.span(tok))
            scope[tok.text] = var
            return PatternVar(var)
        if tok.kind == PUNCT and tok.text == "(":
            subs = []
            while not self.is_punct(")"):
                subs.append(self.parse_pattern(scope))
                if not self.accept(","):
                    break
            self.expect(")", "to close the tuple pattern")
            return PatternTuple(subs)
        if tok.kind == IDENT:
            ctor = self.ctors.get(tok.text)
            if ctor is None:
                raise self.error(tok, f"unknown constructor '{tok.text}' in a pattern")
            subs = []
            if self.accept("("):
                while not self.is_punct(")"):
                    subs.append(self.parse_pattern(scope))
                    if not self.accept(","):
                        break
                self.expect(")", f"after the sub-patterns of {tok.text}")
            try:
                return PatternConstructor(ctor, subs)
            except TypeError as err:
                raise self.error(tok, str(err)) from None
        raise self.error(tok, "expected a pattern (a constructor, %x, _ or a tuple), found "
                              f"{tok.describe()}")


def parse(text: str, source: str | None = None) -> Module:
    """The module written in ``text`` (``source``: a file name for messages)."""
    with recursion_room(8 * MAX_DEPTH + 200):
        return _Parser(text, source).parse_module()


def parse_expr(text: str, free_vars: Sequence[Var] = (), module: Module | None = None,
               source: str | None = None) -> Expr:
    """The expression written in ``text``. ``free_vars`` may be referred to by their name
    hints (``%x``); ``module`` supplies the globals and constructors it may use."""
    with recursion_room(8 * MAX_DEPTH + 200):
        p = _Parser(text, source, module)
        p.skip_header()
        p.scopes.append({"%" + v.name_hint: v for v in free_vars})
        return p.parse_block(EOF, None)
