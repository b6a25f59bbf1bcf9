"""What every ``tensortune`` command shares: the one-line error type, the database
context, JSON printing, command groups and sub-commands with their common options."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

import workers


class CLIError(Exception):
    """An expected failure, reported to the user as one line without a traceback."""


def _json_default(value: Any) -> Any:
    """Serialise numpy scalars (and anything else with ``.item()``) as plain numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


DB_HELP = (
    "database URL (sqlite:///PATH, postgresql://USER@HOST/DB) or SQLite file path; "
    "default: $TENSORTUNE_DB_URL, else $TENSORTUNE_HOME/tuning.db"
)


RAY_TOKEN_HELP = (
    "file holding the Ray cluster's token, when its head uses token authentication "
    "(default: $RAY_AUTH_TOKEN, else the file $RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token)"
)


def add_ray_options(parser: argparse.ArgumentParser, address_help: str, *,
                    join_first: bool = True) -> None:
    """``--ray-address`` and ``--ray-token-file``; ``join_first``: the command's cluster is
    checked (:func:`join_ray_cluster`) before the command runs, its answer in
    ``args.ray_access`` (otherwise the command checks it itself)."""
    parser.add_argument("--ray-address", metavar="ADDR", help=address_help)
    parser.add_argument("--ray-token-file", metavar="FILE", help=RAY_TOKEN_HELP)
    parser.set_defaults(join_ray_cluster_first=join_first)


def join_ray_cluster(args: argparse.Namespace) -> Any:
    """Check that the Ray cluster a command asks for (``--ray-address``, else
    ``$TENSORTUNE_RAY_ADDRESS``) can be joined, with ``--ray-token-file``'s token if given,
    and, for a command that drives it (tunes), that this host is one of its nodes: its
    ``workers.RayAccess``, None when no cluster is asked for (or ``local``), and a
    :class:`CLIError` naming the problem when it cannot be joined."""
    address = args.ray_address or os.environ.get(workers.RAY_ADDRESS_ENV, "")
    try:
        if args.ray_token_file:
            workers.use_token_file(args.ray_token_file)
        if not address or address == "local":
            return None
        access = workers.check_ray_head(address)
        if getattr(args, "join_ray_cluster_first", False):  # it will drive the cluster
            workers.require_ray_node(address)
        return access
    except workers.RayAccessError as exc:
        raise CLIError(str(exc)) from None


@contextlib.contextmanager
def _database(url: str | None) -> Iterator[Any]:
    """A ``db.Database`` for ``url``; its errors end as one CLI error line."""
    try:
        import db
    except ImportError as exc:
        raise CLIError(
            f"the database layer needs its dependencies ({exc}): pip install 'tensortune[db]'"
        ) from exc
    try:
        database = db.Database(url)
        try:
            yield database
        finally:
            database.close()
    except db.DatabaseError as exc:
        raise CLIError(str(exc)) from exc


def _print_json(payload: Any) -> None:
    print(json.dumps(payload, indent=2, default=_json_default))


def subcommand(commands: Any, name: str, handler: Any, *, help: str, description: str = "",
               epilog: str = "", db: bool = True,
               json_help: str | None = "print the result as JSON") -> argparse.ArgumentParser:
    """Add ``NAME`` to ``commands`` (sub-parsers) with its help texts (kept as written),
    the ``--db URL`` option unless ``db`` is false, ``--json`` unless ``json_help`` is
    None, and ``handler(args) -> exit status``. Returns its parser for more arguments."""
    parser = commands.add_parser(name, help=help, description=description or None,
                                 epilog=epilog or None,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    if db:
        parser.add_argument("--db", metavar="URL", help=DB_HELP)
    if json_help is not None:
        parser.add_argument("--json", action="store_true", help=json_help)
    parser.set_defaults(handler=handler)
    return parser


def command_group(commands: Any, name: str, *, help: str, description: str, epilog: str,
                  title: str = "commands", metavar: str = "COMMAND") -> Any:
    """Add ``tensortune NAME SUBCOMMAND`` (a sub-command is required); returns the group's
    sub-parsers. The chosen sub-command is stored as ``args.<name>_command``."""
    group = commands.add_parser(name, help=help, description=description, epilog=epilog,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = group.add_subparsers(title=title, dest=f"{name}_command", metavar=metavar)
    sub.required = True
    return sub
