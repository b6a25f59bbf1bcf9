"""The ``tensortune ir`` commands: ``ir check FILE`` (parse and type-check a program in the
IR's text format, printing the inferred type of each global function) and ``ir run FILE``
(run its ``@main`` in the reference interpreter on inputs from an ``.npz`` file).

Running a program here only interprets parsed data with the IR's own interpreter: nothing
in the file is executed as Python, and ``.npz`` files are loaded without pickle.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .cli_common import CLIError, _print_json, command_group, subcommand


def _ir() -> Any:
    try:
        import ir
    except ImportError as exc:  # pragma: no cover - ir is part of the package
        raise CLIError(f"the graph IR is not available: {exc}") from exc
    return ir


def _need(ir: Any, name: str) -> Any:
    fn = getattr(ir, name, None)
    if fn is None:
        raise CLIError(f"this build of the IR has no ir.{name}")
    return fn


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {path}: {exc}") from exc


def _parse_and_check(path: str, check: bool = True) -> Any:
    """The module of ``path``, type-checked; a CLIError with the position otherwise."""
    ir = _ir()
    parse = _need(ir, "parse")
    text = _read(path)
    try:
        mod = parse(text)
    except Exception as exc:  # a parse error names line and column
        raise CLIError(f"{path}: {exc}") from exc
    if check:
        infer_type = _need(ir, "infer_type")
        try:
            typed = infer_type(mod)
        except Exception as exc:  # IRTypeError: the position, the operator, the shapes
            raise CLIError(f"{path}: {exc}") from exc
        mod = typed if typed is not None else mod
    return mod


def _global_types(mod: Any) -> dict[str, str]:
    out = {}
    for gv, fn in mod.functions.items():
        ty = getattr(fn, "checked_type_or_none", None)
        out[gv.name] = str(ty) if ty is not None else "?"
    return out


def _cmd_check(args: argparse.Namespace) -> int:
    mod = _parse_and_check(args.file)
    types = _global_types(mod)
    if args.json:
        _print_json({"file": args.file, "ok": True, "globals": types})
    else:
        for name, ty in types.items():
            print(f"@{name}: {ty}")
    return 0


def flatten_value(value: Any) -> list[np.ndarray]:
    """The tensors of an interpreter value, depth first: a tensor is itself; tuples and ADT
    values (their fields) are flattened in order."""
    ir = _ir()
    out: list[np.ndarray] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, ir.ADTValue):
            stack.extend(reversed(v.fields))
        elif isinstance(v, tuple):
            stack.extend(reversed(v))
        elif isinstance(v, np.ndarray | np.generic):
            out.append(np.asarray(v))
        else:
            raise CLIError(f"@main returned a {type(v).__name__}, which cannot be saved "
                           "(only tensors, tuples and ADT values of tensors)")
    return out


def load_npz(path: str | None) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file by name (loaded without pickle); {} for None."""
    if path is None:
        return {}
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot read inputs from {path}: {exc}") from exc


def save_npz(path: str | None, arrays: dict[str, np.ndarray]) -> None:
    """Save ``arrays`` by name to ``path`` (nothing for None)."""
    if path is None:
        return
    try:
        np.savez(path, **arrays)
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc}") from exc


def _cmd_run(args: argparse.Namespace) -> int:
    ir = _ir()
    mod = _parse_and_check(args.file, check=not args.no_check)
    if "main" not in mod:
        raise CLIError(f"{args.file}: the program has no @main function")
    params = [p.name_hint for p in mod["main"].params]
    inputs = load_npz(args.inputs)
    missing = [p for p in params if p not in inputs]
    unknown = [k for k in inputs if k not in params]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing input(s) {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown input(s) {', '.join(unknown)}")
        raise CLIError(f"{'; '.join(parts)} (@main takes {', '.join(params) or 'nothing'})")
    try:
        result = ir.evaluate(mod, **inputs)
    except ir.EvaluationError as exc:
        raise CLIError(f"{args.file}: {exc}") from exc
    tensors = flatten_value(result)
    single = isinstance(result, np.ndarray | np.generic)
    names = ["out"] if single else [f"out_{i}" for i in range(len(tensors))]
    arrays = dict(zip(names, tensors, strict=True))
    save_npz(args.output, arrays)
    summary = {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in
               arrays.items()}
    if args.json:
        _print_json({"file": args.file, "output": args.output, "outputs": summary})
    else:
        for name, a in arrays.items():
            print(f"{name}: {a.dtype}{list(a.shape)}")
        if args.output:
            print(f"wrote {len(arrays)} array(s) to {args.output}", file=sys.stderr)
    return 0


def add_ir_commands(commands: Any) -> None:
    """Register ``ir check`` and ``ir run`` on the ``tensortune`` subparsers."""
    ir_sub = command_group(
        commands, "ir", help="check and run programs in the graph IR's text format",
        description="Type-check and interpret programs written in the graph IR's text format.",
        epilog="examples:\n  tensortune ir check model.tt\n"
               "  tensortune ir run model.tt --inputs in.npz --output out.npz")
    check = subcommand(
        ir_sub, "check", _cmd_check, db=False,
        help="parse and type-check a program; print each global's type",
        description=(
            "Parse FILE (the text format, #[version = \"0.0.5\"]) and type-check the whole\n"
            "module. Prints the inferred type of every global function, or the first error\n"
            "with its line and column (exit status 1)."
        ),
        epilog="examples:\n  tensortune ir check model.tt\n  tensortune ir check model.tt --json",
    )
    check.add_argument("file", metavar="FILE", help="a program in the IR's text format")
    run = subcommand(
        ir_sub, "run", _cmd_run, db=False,
        help="run @main in the reference interpreter",
        description=(
            "Parse and type-check FILE, then run its @main in the IR's reference interpreter\n"
            "(numpy). Inputs come from an .npz file, one array per @main parameter name\n"
            "(loaded without pickle). A tensor result is saved as 'out'; tuple and ADT\n"
            "results are flattened depth first into out_0, out_1, ...\n"
            "Only the IR interpreter runs: nothing in FILE is executed as Python. Still,\n"
            "a program may loop for ever or allocate much memory: run programs you trust."
        ),
        epilog=(
            "examples:\n  tensortune ir run model.tt --inputs in.npz --output out.npz\n"
            "  tensortune ir run model.tt --inputs in.npz --json"
        ),
    )
    run.add_argument("file", metavar="FILE", help="a program in the IR's text format")
    run.add_argument("--inputs", metavar="NPZ", help="@main's inputs by parameter name")
    run.add_argument("--output", metavar="NPZ", help="where to save the result(s)")
    run.add_argument("--no-check", action="store_true",
                     help="skip type checking (the interpreter still checks at run time)")
