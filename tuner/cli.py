"""The ``tensortune`` command line (also ``python -m tuner``): argument parsing and one
function per subcommand.

Each subcommand is registered in :func:`build_parser` with an example in its ``--help``
epilog. Usage errors exit with status 2 (argparse); expected failures raise
:class:`CLIError` and end as one ``tensortune: error: ...`` line with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from tuner import __version__

PROG = "tensortune"

# What schedule.examples.matmul_report(size, repeat) returns.
DEMO_REPORT_KEYS = ("gflops", "numpy_gflops", "ratio", "max_abs_err", "schedule")


class CLIError(Exception):
    """An expected failure, reported to the user as one line without a traceback."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _json_default(value: Any) -> Any:
    """Serialise numpy scalars (and anything else with ``.item()``) as plain numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def format_demo_report(report: dict[str, Any], size: int, repeat: int) -> str:
    """Human-readable text for the ``demo`` command's report."""
    lines = [
        f"matmul {size}x{size}x{size} float32, {repeat} repeat(s), hand-written schedule",
        f"  tensortune  {float(report['gflops']):10.2f} GFLOP/s",
        f"  numpy       {float(report['numpy_gflops']):10.2f} GFLOP/s  (measured in this run)",
        f"  ratio       {float(report['ratio']):10.2f} x numpy",
        f"  max |error| {float(report['max_abs_err']):10.2e}  (against numpy)",
        "schedule:",
    ]
    lines += [f"  {line}" for line in str(report["schedule"]).splitlines()]
    return "\n".join(lines)


def _cmd_demo(args: argparse.Namespace) -> int:
    try:
        from schedule import examples
    except ImportError as exc:
        raise CLIError(f"the schedule layer is not available: {exc}") from exc
    report = examples.matmul_report(args.size, args.repeat)
    missing = [key for key in DEMO_REPORT_KEYS if key not in report]
    if missing:
        raise CLIError(f"schedule.examples.matmul_report gave no {', '.join(missing)}")
    if args.json:
        payload = {"size": args.size, "repeat": args.repeat, **report}
        print(json.dumps(payload, indent=2, default=_json_default))
    else:
        print(format_demo_report(report, args.size, args.repeat))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``tensortune`` and all its subcommands."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Auto-scheduling and tuning of tensor programs.",
        epilog="example:\n  tensortune demo --size 512",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    commands.required = True

    demo = commands.add_parser(
        "demo",
        help="build and run a hand-scheduled matmul, compare its speed with numpy",
        description=(
            "Build a hand-scheduled float32 matmul (N x N x N) through the schedule layer,\n"
            "check it against numpy, and print its GFLOP/s next to numpy's measured in the\n"
            "same run."
        ),
        epilog="examples:\n  tensortune demo\n  tensortune demo --size 512 --repeat 3 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--size", type=_positive_int, default=1024, metavar="N", help="M = N = K (default 1024)"
    )
    demo.add_argument(
        "--repeat", type=_positive_int, default=5, metavar="R", help="timed runs (default 5)"
    )
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    demo.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tensortune`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.handler(args)
    except CLIError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
