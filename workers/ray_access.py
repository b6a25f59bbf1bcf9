"""Reaching a Ray cluster's head before joining it: is it up, does it want a token, is ours
the right one.

Ray 2.5x+ protects a cluster with token authentication when the head is started with
``RAY_AUTH_MODE=token`` or finds a token in ``~/.ray/auth_token`` (which any local
``ray.init()`` creates). A process that joins such a head without the token does not fail:
Ray retries once a second for a minute, then raises. So before any Ray process is started
or joined, :func:`check_ray_head` asks the head's GCS one gRPC question (its cluster id),
first without a token and then, if the head refuses that, with the token found the way Ray
looks for it (``RAY_AUTH_TOKEN``, then the file named by ``RAY_AUTH_TOKEN_PATH``, then
``~/.ray/auth_token``). That takes milliseconds and gives one of three answers: the head
is open, the head accepts our token, or a :class:`RayAccessError` whose message says in one
line what is wrong and how to fix it (no token, wrong token, nothing listening, no answer).

:class:`RayAccess` carries what the joining processes need in their environment
(``RAY_AUTH_MODE`` and the token's variable) and applies it to this process before
``ray.init``.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

from .cluster import (
    RAY_AUTH_MODE_ENV,
    RAY_TOKEN_ENV,
    RAY_TOKEN_PATH_ENV,
    ClusterLostError,
    RayAccessError,
    split_address,
)

HEAD_TIMEOUT_S = 10.0
"""How long the head may take to answer before it is reported as not answering."""
HEAD_GRACE_S = 10.0
"""How long a head may stay silent while a pool waits on the cluster before the cluster is
given up (Ray itself ends a process whose head has been gone for 60 s)."""
HEAD_CHECK_INTERVAL_S = 2.0
"""How often a pool waiting on the cluster asks whether the head still answers."""

_DEFAULT_TOKEN_FILE = Path("~/.ray/auth_token")


@dataclass(frozen=True)
class RayAccess:
    """How to join the head at ``address``: with a token (``token_source`` says where it
    came from) or without; ``environment`` is what every joining process needs."""

    address: str
    token_source: str = ""
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def uses_token(self) -> bool:
        return bool(self.token_source)

    def describe(self) -> str:
        """A few words for a progress line."""
        if self.uses_token:
            return f"token authentication, token from {self.token_source}"
        return "no authentication"

    def apply(self) -> None:
        """Put :attr:`environment` into this process's environment and have Ray re-read
        it (Ray reads its configuration once, at import); only before ``ray.init``."""
        os.environ.update(self.environment)
        from ray._raylet import Config  # Ray's own way to re-read RAY_AUTH_MODE

        Config.initialize("")


def _token(environ: Mapping[str, str]) -> tuple[str, str, dict[str, str]]:
    """(token, where it came from, the variable that hands it on), in Ray's order; the
    token is "" when there is none."""
    if environ.get(RAY_TOKEN_ENV, "").strip():
        token = environ[RAY_TOKEN_ENV].strip()
        return token, RAY_TOKEN_ENV, {RAY_TOKEN_ENV: token}
    if environ.get(RAY_TOKEN_PATH_ENV):
        path = Path(environ[RAY_TOKEN_PATH_ENV]).expanduser()
        source = f"{RAY_TOKEN_PATH_ENV}={path}"
    else:
        path = _DEFAULT_TOKEN_FILE.expanduser()
        if not path.exists():
            return "", "", {}
        source = str(path)
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise RayAccessError(f"cannot read the Ray token file {path}: "
                             f"{exc.strerror or exc}") from None
    if not token:
        raise RayAccessError(f"the Ray token file {path} is empty")
    return token, source, {RAY_TOKEN_PATH_ENV: str(path)}


def _current_token() -> str:
    """The token this process presents ("" unless Ray's token mode is on)."""
    if os.environ.get(RAY_AUTH_MODE_ENV, "").lower() != "token":
        return ""
    return _token(os.environ)[0]


def _ask_cluster_id(address: str, token: str, timeout_s: float) -> grpc.StatusCode | None:
    """None if the head answered, else the gRPC status of the failure."""
    metadata = [("authorization", f"Bearer {token}")] if token else []
    with grpc.insecure_channel(address) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s,
                              metadata=metadata)
        except grpc.RpcError as err:
            return err.code()
    return None


def _unreachable(address: str, status: grpc.StatusCode, timeout_s: float) -> RayAccessError:
    host, port = split_address(address)
    if status == grpc.StatusCode.UNAVAILABLE:
        try:
            socket.getaddrinfo(host, port)
        except socket.gaierror:
            return RayAccessError(f"the Ray head's host name {host!r} cannot be resolved "
                                  f"(in {address})")
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        what = f"did not answer within {timeout_s:g} s"
    elif status == grpc.StatusCode.UNAVAILABLE:
        what = "cannot be reached (nothing listening there, or no route to it)"
    else:
        what = f"answered {status.name}, which is not how a Ray head answers"
    return RayAccessError(f"the Ray head at {address} {what}: is `ray start --head "
                          f"--port={port}` running there, and is port {port} open from "
                          "this host?")


def check_ray_head(address: str, timeout_s: float = HEAD_TIMEOUT_S,
                   environ: Mapping[str, str] | None = None) -> RayAccess:
    """How to join the Ray head at ``address`` (``host:port``), checked by asking it; raises
    :class:`RayAccessError` (one line) when it cannot be joined. ``environ``: where the
    token variables are read (default: this process's environment)."""
    split_address(address)
    environ = os.environ if environ is None else environ
    status = _ask_cluster_id(address, "", timeout_s)
    if status is None:
        return RayAccess(address, environment={RAY_AUTH_MODE_ENV: "disabled"})
    if status != grpc.StatusCode.UNAUTHENTICATED:
        raise _unreachable(address, status, timeout_s)
    token, source, handed_on = _token(environ)
    how = (f"give the head's token with --ray-token-file FILE, {RAY_TOKEN_ENV} or "
           f"{RAY_TOKEN_PATH_ENV} (on the head it is in ~/.ray/auth_token unless the head "
           f"was started with {RAY_TOKEN_ENV} or {RAY_TOKEN_PATH_ENV})")
    if not token:
        raise RayAccessError(f"the Ray head at {address} uses token authentication and no "
                             f"token was given: {how}")
    status = _ask_cluster_id(address, token, timeout_s)
    if status == grpc.StatusCode.UNAUTHENTICATED:
        raise RayAccessError(f"the Ray head at {address} refused the token from {source}: "
                             f"{how}")
    if status is not None:
        raise _unreachable(address, status, timeout_s)
    return RayAccess(address, source, {RAY_AUTH_MODE_ENV: "token", **handed_on})


def is_local_address(ip: str) -> bool:
    """Whether ``ip`` is an address of this host (of its network namespace)."""
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((ip, 0))
    except OSError:
        return False
    return True


def raylet_running_here() -> bool:
    """Whether a Ray node (its ``raylet`` process) runs on this host; True where processes
    cannot be listed (no ``/proc``): Ray will say so itself."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
            except OSError:
                continue
            if argv0.rsplit(b"/", 1)[-1] == b"raylet":
                return True
    return False


def require_ray_node(address: str) -> None:
    """Raise :class:`RayAccessError` unless a Ray node runs on this host: a process that
    drives the cluster at ``address`` (tunes) must run on one of its nodes."""
    if not raylet_running_here():
        raise not_a_node_error(address)


def not_a_node_error(address: str, node_ip: str = "") -> RayAccessError:
    """This host is not a node of the cluster at ``address`` (``node_ip``: the node Ray
    would have put this process on). A Ray driver must run on a node: the cluster calls it
    back at its node's address."""
    placed = f" (Ray put this process on the node at {node_ip})" if node_ip else ""
    return RayAccessError(
        f"this host is not a node of the Ray cluster at {address}{placed}: join it first, "
        f"without devices if it has none to offer: `tensortune worker --ray-address "
        f"{address} --devices none`, or tune from the head or a worker host")


class HeadWatch:
    """Whether the head at ``address`` still answers, for a pool that waits on the cluster.

    A process whose head is gone blocks in every call that needs the head (``ray.nodes()``,
    killing an actor) until Ray ends it a minute later. The pool waits in short slices and
    asks :meth:`check` between them, and asks :meth:`require` before such a call; both
    raise :class:`ClusterLostError` once the head has not answered for ``grace_s``, after
    which :attr:`lost` tells the pool to skip every call that needs the head.
    """

    def __init__(self, address: str, grace_s: float = HEAD_GRACE_S,
                 interval_s: float = HEAD_CHECK_INTERVAL_S):
        self.address = address
        self.grace_s = grace_s
        self.interval_s = interval_s
        self.lost = False
        self._silent_since: float | None = None

    def answers(self) -> bool:
        """Whether the head answers now (never raises)."""
        return not self.lost and _ask_cluster_id(self.address, _current_token(),
                                                 self.interval_s) is None

    def check(self) -> bool:
        """Whether the head answered just now; raises once it has been silent too long."""
        if self.answers():
            self._silent_since = None
            return True
        now = time.monotonic()
        if self._silent_since is None:
            self._silent_since = now
        if self.lost or now - self._silent_since >= self.grace_s:
            self.lost = True
            raise ClusterLostError(
                f"the Ray head at {self.address} stopped answering (silent for "
                f"{self.grace_s:g} s): the cluster is gone; what was measured is kept")
        return False

    def require(self) -> None:
        """Return once the head answers (raising if it stays silent too long)."""
        while not self.check():
            time.sleep(self.interval_s)
