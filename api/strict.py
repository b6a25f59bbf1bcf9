"""Strict reading of requests, before any handler sees them: JSON bodies with NaN,
Infinity, numbers out of range or NUL characters, and query, path or header values with
NUL characters, are refused with a 422 that names the field; validation errors never echo
the input back (it may not be JSON-serialisable, or may be large)."""

from __future__ import annotations

import email.message
import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

#: Integers in JSON bodies must fit in 64 bits (what the database and the C code hold).
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
NUL_MESSAGE = "contains a NUL character (\\u0000), which is not allowed"

Loc = tuple[str | int, ...]


class _Refused:
    """A JSON value the parser refused, kept in place so that its field can be named."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _parse_int(text: str) -> int | _Refused:
    # Digits first: int() of thousands of digits is slow, or refused by Python itself.
    if len(text.lstrip("-")) > 19 or not INT_MIN <= (value := int(text)) <= INT_MAX:
        return _Refused(f"integer out of range: from {INT_MIN} to {INT_MAX}")
    return value


def _parse_float(text: str) -> float | _Refused:
    value = float(text)
    if not math.isfinite(value):
        return _Refused("number out of range: not a finite 64-bit float")
    return value


def _parse_constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a valid JSON number: numbers must be finite")


def _error(loc: Loc, msg: str, kind: str = "value_error") -> RequestValidationError:
    return RequestValidationError([{"type": kind, "loc": loc, "msg": msg}])


def _first_refusal(data: Any) -> tuple[Loc, str] | None:
    """Where the first refused value or NUL-holding string is in ``data`` (iteratively:
    any depth json.loads accepts), and why; None when there is none."""
    pending: list[tuple[Any, Loc]] = [(data, ("body",))]
    while pending:
        value, loc = pending.pop()
        if isinstance(value, _Refused):
            return loc, value.why
        if isinstance(value, str):
            if "\x00" in value:
                return loc, NUL_MESSAGE
        elif isinstance(value, dict):
            for key in value:
                if "\x00" in key:
                    return loc, f"a field name {NUL_MESSAGE}"
            pending.extend((item, (*loc, key)) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            pending.extend((item, (*loc, n)) for n, item in reversed(list(enumerate(value))))
    return None


def loads_strict(body: bytes) -> Any:
    """A JSON body parsed, or RequestValidationError (422) naming the field at fault."""
    try:
        data = json.loads(body, parse_int=_parse_int, parse_float=_parse_float,
                          parse_constant=_parse_constant)
    except json.JSONDecodeError as err:
        raise _error(("body", err.pos), f"JSON decode error: {err.msg} at line "
                     f"{err.lineno} column {err.colno}", "json_invalid") from None
    except RecursionError:
        raise _error(("body",), "JSON decode error: nested too deeply",
                     "json_invalid") from None
    except ValueError as err:  # not UTF-8 (or UTF-16/32) text
        message = str(err).split(";")[0]
        raise _error(("body",), f"JSON decode error: {message}", "json_invalid") from None
    refusal = _first_refusal(data)
    if refusal is not None:
        raise _error(*refusal)
    return data


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of this content type as JSON (as it decides)."""
    if not content_type:
        return True
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json"))


def check_request_strings(request: Request) -> None:
    """422 for a NUL character in a path parameter, query parameter or header."""
    for where, items in (("path", request.path_params.items()),
                         ("query", request.query_params.multi_items()),
                         ("header", request.headers.items())):
        for name, value in items:
            if "\x00" in str(name) or "\x00" in str(value):
                raise _error((where, str(name).replace("\x00", "\\u0000")), NUL_MESSAGE)


class StrictRoute(APIRoute):
    """A route whose request is checked by :func:`check_request_strings` and whose JSON
    body is read by :func:`loads_strict` before FastAPI validates it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        reads_json = self.body_field is not None

        async def strict_handler(request: Request) -> Response:
            check_request_strings(request)
            if reads_json and _is_json(request.headers.get("content-type")):
                body = await request.body()
                if body:
                    # FastAPI's request.json() returns what is cached here.
                    request._json = loads_strict(body)
            return await handler(request)

        return strict_handler


def _plain(part: Any) -> str | int:
    return part if isinstance(part, str | int) and not isinstance(part, bool) else str(part)


async def validation_error(_: Request, err: RequestValidationError) -> JSONResponse:
    """422 with each error's type, field and message: never the input (which may hold
    NaN, huge numbers or bytes JSON cannot carry)."""
    detail = [{"type": str(e.get("type", "value_error")),
               "loc": [_plain(part) for part in e.get("loc", ())],
               "msg": str(e.get("msg", ""))} for e in err.errors()]
    return JSONResponse({"detail": detail}, status_code=422)
