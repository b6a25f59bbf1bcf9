"""The service commands of ``tensortune``: ``serve`` (the REST API and dashboard under
uvicorn), ``token create`` (a new API token with a role, printed once) and
``device-server`` (a remote board's server: runs programs on its device for tuners on other
hosts, ``workers.device_server``).

The API lives in the ``api`` layer above this one, so ``serve`` hands uvicorn the app
factory by its import string (``api:create_app``) instead of importing it; the factory
reads its settings from the ``TENSORTUNE_*`` variables this command sets from its flags.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import Any

from .cli_common import (
    CLIError,
    _database,
    _print_json,
    add_ray_options,
    command_group,
    subcommand,
)

#: The API roles, weakest first (the same as ``api.ROLES``; a token's role is its name).
ROLES = ("reader", "submitter", "admin")
APP_FACTORY = "api:create_app"
_FALSE = frozenset({"0", "false", "off", "no", "n", "f"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError as exc:
        raise CLIError(f"serving needs the api extra ({exc}): pip install 'tensortune[api]'") \
            from exc
    auth = not args.no_auth and os.environ.get("TENSORTUNE_AUTH", "1").lower() not in _FALSE
    if not auth and not is_loopback(args.host):
        raise CLIError(f"refusing to serve on {args.host} with authentication off: without "
                       "tokens, bind to a loopback address (127.0.0.1, ::1) only")
    env = {"TENSORTUNE_HOST": args.host, "TENSORTUNE_PORT": str(args.port),
           "TENSORTUNE_AUTH": "1" if auth else "0"}
    if args.db:
        env["TENSORTUNE_DB_URL"] = args.db
    if args.ray_address:
        env["TENSORTUNE_RAY_ADDRESS"] = args.ray_address
    os.environ.update(env)
    mode = "tokens required" if auth else "NO authentication (local use)"
    print(f"tensortune: serving on http://{args.host}:{args.port} ({mode}); "
          f"dashboard at /, API docs at /docs", file=sys.stderr)
    # open event streams would hold a stopping server: they get a few seconds to end
    uvicorn.run(APP_FACTORY, factory=True, host=args.host, port=args.port,
                log_level=args.log_level, timeout_graceful_shutdown=5)
    return 0


def _cmd_token_create(args: argparse.Namespace) -> int:
    with _database(args.db) as database:
        secret, info = database.tokens.create(args.owner, name=args.role)
    if args.json:
        _print_json({"token": secret, "role": args.role, "id": info.id, "owner": info.owner})
    else:
        print(secret)
        print(f"{args.role} token {info.id} for {info.owner}; the secret above is shown only "
              "once", file=sys.stderr)
    return 0


def _cmd_device_server(args: argparse.Namespace) -> int:
    from schedule import vta
    from workers import read_device_key, serve_device

    try:
        key = read_device_key(args.token_file)
        config = vta.VtaConfig.for_target(args.target, args.preset)
    except ValueError as err:
        raise CLIError(str(err)) from None

    def ready(address: tuple[str, int]) -> None:
        print(f"tensortune: device server for {args.target} (simulated, {config.name} preset, "
              f"{config.clock_mhz:g} MHz) on {address[0]}:{address[1]}", file=sys.stderr,
              flush=True)

    try:
        serve_device(args.host, args.port, key, config, run_timeout=args.run_timeout,
                     ready=ready)
    except OSError as err:
        raise CLIError(f"cannot serve on {args.host}:{args.port}: {err.strerror}") from None
    except KeyboardInterrupt:
        pass
    return 0


def add_service_commands(commands: Any) -> None:
    """Register ``serve``, ``token`` and ``device-server`` on the ``tensortune``
    subparsers."""
    serve = subcommand(
        commands, "serve", _cmd_serve, json_help=None,
        help="run the REST API and dashboard",
        description=(
            "Serve the REST API (/v1/..., OpenAPI at /docs) and the dashboard (/) with\n"
            "uvicorn. Submitted jobs run in this server, sharing this machine fairly; jobs\n"
            "left queued or running by a stopped server are resumed. Configured by the\n"
            "TENSORTUNE_* variables (api.Settings) and these flags. Authentication is on\n"
            "unless --no-auth (or TENSORTUNE_AUTH=0), which binds to loopback only."
        ),
        epilog=(
            "examples:\n  tensortune token create --role admin\n  tensortune serve\n"
            "  tensortune serve --host 0.0.0.0 --port 8080 --db postgresql://tuner@db/tuning\n"
            "  tensortune serve --no-auth"
        ),
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    add_ray_options(serve, "measure on this Ray cluster, host:port (default: "
                           "$TENSORTUNE_RAY_ADDRESS, else this machine)")
    serve.add_argument("--no-auth", action="store_true",
                       help="no tokens needed (local use; loopback addresses only)")
    serve.add_argument("--log-level", default="info",
                       choices=("critical", "error", "warning", "info", "debug"))

    device = subcommand(
        commands, "device-server", _cmd_device_server, db=False, json_help=None,
        help="serve a device (the vta simulator) to tuners on other hosts",
        description=(
            "Run programs on this host's device for authenticated clients: every message\n"
            "carries an HMAC of the shared key in --token-file, a nonce and a time (replays\n"
            "and stale messages are refused). Each program runs in a sandbox process, one at\n"
            "a time; a bad one is an error answer, and the server goes on. The vta device is\n"
            "the simulator (its figures are simulated cycles at the preset's clock)."
        ),
        epilog=(
            "example:\n  python -c 'import secrets; print(secrets.token_hex(32))' > vta.key\n"
            "  tensortune device-server --device vta --port 9091 --token-file vta.key"
        ),
    )
    device.add_argument("--device", choices=("vta",), default="vta", help="the device kind")
    device.add_argument("--host", default="127.0.0.1", help="address to bind (default "
                                                            "127.0.0.1)")
    device.add_argument("--port", type=int, required=True, help="port (0: any free one)")
    device.add_argument("--token-file", required=True, metavar="FILE",
                        help="the shared key (at least 16 bytes), the same on the clients")
    device.add_argument("--target", default="vta", help="the vta target served (default "
                                                        "vta: -config=1x16x16)")
    device.add_argument("--preset", default="pynq", choices=("pynq", "ultra96"),
                        help="the board's clock and bus (default pynq: 100 MHz, 64-bit)")
    device.add_argument("--run-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="a program running longer is killed (default 60)")

    token_sub = command_group(
        commands, "token", help="manage API tokens", description="Manage API tokens.",
        epilog="example:\n  tensortune token create --role submitter --json")
    create = subcommand(
        token_sub, "create", _cmd_token_create,
        json_help='print {"token": ..., "role": ...} as JSON',
        help="create an API token with a role; prints the secret once",
        description=(
            "Create an API token. Roles: reader (queries), submitter (also submits jobs and\n"
            "cancels its own), admin (also imports records, manages tokens, any job). Only\n"
            "its hash is stored: the secret is printed this once."
        ),
        epilog=(
            "examples:\n  tensortune token create --role reader\n"
            "  tensortune token create --role admin --owner ci --json"
        ),
    )
    create.add_argument("--role", required=True, choices=ROLES, help="the token's role")
    create.add_argument("--owner",
                        help="a shared owner: tokens of one owner may cancel each other's "
                             "jobs (default: the token is its own owner)")

