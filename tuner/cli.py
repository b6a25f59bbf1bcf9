"""The ``tensortune`` command line (also ``python -m tuner``): argument parsing and one
function per subcommand.

Each subcommand is registered in :func:`build_parser` with an example in its ``--help``
epilog. Usage errors exit with status 2 (argparse); expected failures raise
:class:`CLIError` and end as one ``tensortune: error: ...`` line with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from tuner import __version__

from .cli_common import (
    CLIError,
    _database,
    _json_default,
    _print_json,
    add_ray_options,
    command_group,
    join_ray_cluster,
    subcommand,
)
from .cli_ir import add_ir_commands
from .cli_model import add_model_commands
from .cli_service import add_service_commands
from .cli_tune import add_tuning_commands

PROG = "tensortune"

# What schedule.examples.matmul_report(size, repeat) returns.
DEMO_REPORT_KEYS = ("gflops", "numpy_gflops", "ratio", "max_abs_err", "schedule")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


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


# --- db and records ---------------------------------------------------------------------

def _cmd_db_upgrade(args: argparse.Namespace) -> int:
    with _database(args.db) as database:
        before, after = database.upgrade()
        url = database.display_url
    if args.json:
        _print_json({"database": url, "from_revision": before, "to_revision": after})
    elif before == after:
        print(f"{url}: schema already at revision {after}")
    else:
        print(f"{url}: schema upgraded from revision {before or '(empty)'} to {after}")
    return 0


def _record_filters(args: argparse.Namespace) -> dict[str, Any]:
    names = ("workload_key", "target", "device_model", "toolchain")
    return {name: getattr(args, name) for name in names if getattr(args, name, None)}


def _cmd_records_export(args: argparse.Namespace) -> int:
    with _database(args.db) as database:
        dest = sys.stdout if args.file == "-" else args.file
        count = database.export_jsonl(dest, **_record_filters(args))
    # With FILE '-' the records are standard output: the summary goes to stderr.
    out = sys.stderr if args.file == "-" else sys.stdout
    if args.json:
        print(json.dumps({"file": args.file, "records": count}, indent=2), file=out)
    else:
        print(f"exported {count} record(s) to {args.file}", file=out)
    return 0


def _cmd_records_import(args: argparse.Namespace) -> int:
    with _database(args.db) as database:
        import db

        src = sys.stdin if args.file == "-" else args.file
        try:
            report = database.import_jsonl(src, skip_bad_lines=args.skip_bad_lines)
        except db.ImportFileError as exc:
            if args.json:  # the full report (every bad line) for machines, then the error
                _print_json(exc.report.to_dict())
            raise
    if args.json:
        _print_json(report.to_dict())
        return 0
    for bad in report.bad_lines:
        print(f"{PROG}: warning: {args.file}: {bad} (skipped)", file=sys.stderr)
    print(
        f"imported {report.added} new record(s) from {args.file}: {report.records} read, "
        f"{report.already_present} already present, {len(report.bad_lines)} bad line(s) skipped"
    )
    if report.unknown_fields:
        print(f"ignored unknown field(s): {', '.join(report.unknown_fields)}")
    return 0


def _cmd_records_distill(args: argparse.Namespace) -> int:
    with _database(args.db) as database:
        filters = _record_filters(args)
        if args.format == "t4":
            count = database.export_t4(args.out, k=args.k, **filters)
        else:
            import db

            count = db.write_jsonl(database.distill(args.k, **filters), args.out)
    if args.json:
        _print_json({"file": args.out, "format": args.format, "k": args.k, "records": count})
    else:
        print(f"wrote the best {args.k} record(s) per workload and target: {count} to {args.out}")
    return 0


def _add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload-key", metavar="KEY", help="only this workload")
    parser.add_argument("--target", metavar="TARGET", help="only this exact target string")
    parser.add_argument("--device-model", metavar="NAME", help="only records measured on it")
    parser.add_argument("--toolchain", metavar="NAME", help="only records built with it")


def _add_db_commands(commands: Any) -> None:
    """The ``db`` and ``records`` command groups."""
    db_sub = command_group(
        commands, "db", help="manage the tuning database (schema upgrades)",
        description="Manage the tuning database.",
        epilog="example:\n  tensortune db upgrade --db postgresql://tuner@dbhost/tuning")
    subcommand(
        db_sub, "upgrade", _cmd_db_upgrade,
        help="bring the database to the current schema without losing a row",
        description=(
            "Create the tensortune schema in an empty database, or bring an older one up to\n"
            "the current schema (Alembic migrations; every row is kept). Running it again\n"
            "does nothing."
        ),
        epilog=(
            "examples:\n  tensortune db upgrade\n"
            "  tensortune db upgrade --db postgresql://tuner@dbhost/tuning --json"
        ),
    )

    rec_sub = command_group(
        commands, "records", help="export, import and distill tuning records",
        description="Export, import and distill tuning records (format: db/FORMAT.md).",
        epilog="example:\n  tensortune records export records.jsonl")
    export = subcommand(
        rec_sub, "export", _cmd_records_export,
        help="write records as JSON lines",
        description=(
            "Write the database's records (or those matching the filters) as JSON lines,\n"
            "one record a line. FILE '-' is standard output; a .gz name is gzip-compressed."
        ),
        epilog=(
            "examples:\n  tensortune records export all.jsonl\n"
            "  tensortune records export avx512.jsonl.gz --target 'cpu -isa=avx512 -cores=2'"
        ),
    )
    export.add_argument("file", metavar="FILE", help="output file ('-' for stdout)")
    _add_filter_arguments(export)

    imp = subcommand(
        rec_sub, "import", _cmd_records_import,
        help="add records from a JSON-lines file (never duplicates)",
        description=(
            "Add the records of a JSON-lines file to the database, in one transaction.\n"
            "Records already present are not added again; unknown fields are ignored. If a\n"
            "line is malformed nothing is imported (the error names the lines), unless\n"
            "--skip-bad-lines is given."
        ),
        epilog=(
            "examples:\n  tensortune records import all.jsonl\n"
            "  tensortune records import old.jsonl.gz --skip-bad-lines --json"
        ),
        json_help="print the import report as JSON",
    )
    imp.add_argument("file", metavar="FILE", help="input file ('-' for stdin)")
    imp.add_argument(
        "--skip-bad-lines", action="store_true", help="import the good lines, report the bad"
    )

    distill = subcommand(
        rec_sub, "distill", _cmd_records_distill,
        help="keep the best k records per workload and target",
        description=(
            "Write the best K error-free records (by median cost) of every workload and\n"
            "target, to ship with a compiled model: JSON lines, or a T4 results document."
        ),
        epilog=(
            "examples:\n  tensortune records distill --k 1 --out best.jsonl\n"
            "  tensortune records distill --k 3 --out best.t4.json --format t4 "
            "--target 'cuda -arch=sm_90'"
        ),
    )
    distill.add_argument("--k", type=_positive_int, required=True, metavar="K",
                         help="records to keep per (workload, target)")
    distill.add_argument("--out", required=True, metavar="FILE", help="output file")
    distill.add_argument("--format", choices=("jsonl", "t4"), default="jsonl",
                         help="jsonl (default) or t4")
    _add_filter_arguments(distill)


def _device_kinds(text: str) -> list[str]:
    """Kinds, each optionally with the device servers it proxies to:
    ``cpu,vta=HOST:PORT,HOST:PORT`` is ``["cpu", "vta=HOST:PORT,HOST:PORT"]``."""
    kinds: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if "=" not in item and ":" in item and kinds and "=" in kinds[-1]:
            kinds[-1] += f",{item}"  # another board of the kind before
        else:
            kinds.append(item)
    if not kinds:
        raise argparse.ArgumentTypeError(f"expected device kinds like cpu or cpu,vta=HOST:PORT, "
                                         f"got {text!r}")
    return kinds


def _board_environment(kinds: list[str], key_file: str | None) -> tuple[list[str],
                                                                         dict[str, str]]:
    """The plain kinds, and the environment naming the boards of ``vta=HOST:PORT,...``
    (what the node's vta device actors proxy to)."""
    plain, env = [], {}
    for kind in kinds:
        name, _, boards = kind.partition("=")
        if boards:
            if name != "vta":
                raise CLIError(f"--devices {kind}: only vta devices are reached through "
                               "device servers")
            if not key_file:
                raise CLIError("--devices vta=HOST:PORT needs --device-key-file (the device "
                               "servers' token file)")
            env["TENSORTUNE_VTA_BOARDS"] = boards
            env["TENSORTUNE_DEVICE_KEY_FILE"] = os.path.abspath(key_file)
        plain.append(name)
    return plain, env


def _cmd_worker(args: argparse.Namespace) -> int:
    try:
        import workers
    except ImportError as exc:
        raise CLIError(f"the workers layer is not available: {exc}") from exc
    address = args.ray_address or os.environ.get(workers.RAY_ADDRESS_ENV, "")
    if not address or address == "local":
        raise CLIError(f"no Ray cluster address: give --ray-address HOST:PORT or set "
                       f"{workers.RAY_ADDRESS_ENV}")
    kinds, board_env = _board_environment([] if args.devices == ["none"] else args.devices,
                                          args.device_key_file)
    os.environ.update(board_env)  # the devices count their boards from it, as actors will
    known = workers.device_kinds()
    unknown = [kind for kind in kinds if kind not in known]
    if unknown:
        raise CLIError(f"unknown device kind(s) {', '.join(unknown)} in --devices; "
                       f"available: {', '.join(known)} (or none)")
    try:
        resources = workers.node_resources(kinds) if kinds else {}
        command = workers.worker_command(address, resources, args.ray_options)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    if args.dry_run:
        print(shlex.join(command))
        return 0
    access = join_ray_cluster(args)
    advertised = ", ".join(f"{name}={count}" for name, count in sorted(resources.items())) \
        or "no devices (a node for builds and for tuning processes)"
    print(f"{PROG}: joining the Ray cluster at {address} ({access.describe()}), "
          f"advertising {advertised} (Ctrl-C to leave)", file=sys.stderr)
    return subprocess.call(command, env={**os.environ, **access.environment, **board_env})


def _add_worker_command(commands: Any) -> None:
    """The ``worker`` command: join a Ray cluster as a measurement node."""
    worker = commands.add_parser(
        "worker",
        help="join a Ray cluster as a measurement node, advertising this machine's devices",
        description=(
            "Start a Ray node that joins the cluster at ADDR and advertises this machine's\n"
            "measurement devices as Ray resources (cpu -> cpu-measure), so that tuning jobs\n"
            "time candidates here. Stays in the foreground until stopped (Ctrl-C)."
        ),
        epilog=(
            "examples:\n"
            "  tensortune worker --ray-address 10.0.0.5:6379\n"
            "  TENSORTUNE_RAY_ADDRESS=10.0.0.5:6379 tensortune worker --devices cpu\n"
            "  tensortune worker --ray-address 10.0.0.5:6379 --ray-token-file head-token\n"
            "  tensortune worker --ray-address 10.0.0.5:6379 --dry-run\n"
            "  tensortune worker --ray-address 10.0.0.5:6379 --devices "
            "vta=10.0.0.9:9091,10.0.0.9:9092 \\\n      --device-key-file vta.key\n"
            "\nThe head is asked first whether it can be joined: a head using token\n"
            "authentication needs its token (--ray-token-file, $RAY_AUTH_TOKEN or\n"
            "$RAY_AUTH_TOKEN_PATH); a wrong or missing token, or a head that cannot be\n"
            "reached, is reported at once."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_ray_options(worker, "the cluster's head node, host:port (default: "
                            "$TENSORTUNE_RAY_ADDRESS)", join_first=False)
    worker.add_argument(
        "--devices", type=_device_kinds, default=["cpu"], metavar="KINDS",
        help="comma-separated device kinds this machine offers (default: cpu); "
             "vta=HOST:PORT,HOST:PORT: vta boards behind device servers, proxied from here "
             "(with --device-key-file); none: join without devices, so that tuning "
             "processes can run on this host",
    )
    worker.add_argument(
        "--device-key-file", metavar="FILE",
        help="the token file of the device servers named in --devices",
    )
    worker.add_argument(
        "--dry-run", action="store_true", help="print the ray start command instead of running it"
    )
    worker.add_argument(
        "ray_options", nargs="*", metavar="-- RAY_START_OPTION",
        help="options after -- go to `ray start` as they are (e.g. fixed ports for a firewall: "
             "-- --node-manager-port=6380 --object-manager-port=6381)",
    )
    worker.set_defaults(handler=_cmd_worker)


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
    add_tuning_commands(commands)
    _add_db_commands(commands)
    _add_worker_command(commands)
    add_service_commands(commands)
    add_ir_commands(commands)
    add_model_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tensortune`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if getattr(args, "join_ray_cluster_first", False):
            args.ray_access = join_ray_cluster(args)
        return args.handler(args)
    except CLIError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. piped into head: the reader has what it wanted
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
