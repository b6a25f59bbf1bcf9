"""The Ray pool on a cluster on this machine (``ray.cluster_utils.Cluster``): the head node
has no measurement device, the others own ``cpu-measure``. Candidates run only where the
device is; crashing and hanging candidates are isolated inside the device actors; a device
that stops answering, or a device node killed mid-batch, loses no candidate; when the last
device dies the rest come back as ``device_lost``; every input gets exactly one result.

One cluster for the whole module (Ray start-up is slow and CI has 2 cores); the tests run
in file order and build on the cluster's state. Each test has its own pool, closed at its
end, since two pools cannot hold the same device.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.workers.faults import FaultyCpuDevice, UnresponsiveCpuDevice
from workers import ErrorKind, MeasureInput, MeasureResult, MeasureSettings

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from workers.ray_pool import RayPool  # noqa: E402

pytestmark = pytest.mark.ray

REPO_ROOT = Path(__file__).resolve().parents[2]
LIGHT = MeasureInput({"op": "matmul", "params": {"M": 32, "N": 32, "K": 32}}, "cpu", [])
# The untiled 512^3 GEMM: long enough (over a second for the check run, warm-up and
# repeats) to be sure it is still running when its node is killed.
HEAVY = MeasureInput({"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}}, "cpu", [])
INVALID = MeasureInput(LIGHT.workload, "cpu", [["fuse", "T_matmul", ["i", "nope"]]])
SETTINGS = MeasureSettings(min_repeat_ms=0, repeat=3)


def fault(name: str) -> MeasureInput:
    return MeasureInput(LIGHT.workload, "cpu", [["fault", name]])


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, Any]]:
    # The nodes' workers import the test device classes (tests.workers.faults).
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), saved]))
    try:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        first = c.add_node(num_cpus=1, resources={"cpu-measure": 1})
        c.wait_for_nodes()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    ray.init(address=c.address)
    yield {"cluster": c, "device_nodes": [first]}
    ray.shutdown()
    c.shutdown()


def _measure(pool: RayPool, inputs: list[MeasureInput],
             on_first_timed: Any = None) -> tuple[list[MeasureResult], Counter]:
    """Measure, counting the results per input; ``on_first_timed(result)`` is called at
    the first result that came from a device."""
    calls: Counter = Counter()
    timed: list[MeasureResult] = []

    def callback(n: int, result: MeasureResult) -> None:
        if result.device and not timed:
            timed.append(result)
            if on_first_timed is not None:
                on_first_timed(result)
        calls[n] += 1

    results = pool.measure(inputs, callback=callback)
    assert calls == Counter(dict.fromkeys(range(len(inputs)), 1))  # exactly one each
    return results, calls


def test_candidates_run_only_on_the_node_with_the_device(cluster) -> None:
    [device_node] = cluster["device_nodes"]
    head = cluster["cluster"].head_node
    with RayPool(SETTINGS) as pool:
        results, _ = _measure(pool, [LIGHT, INVALID, LIGHT, HEAVY])
        assert pool.devices() == [results[0].device]
    assert [r.error_kind for r in results] == [
        ErrorKind.NONE, ErrorKind.INVALID_SCHEDULE, ErrorKind.NONE, ErrorKind.NONE]
    for result in (results[0], results[2], results[3]):
        assert result.provenance.node == device_node.node_id != head.node_id
        assert result.provenance.host == socket.gethostname()
        assert result.device == f"cpu@{socket.gethostname()}/{device_node.node_id[:12]}"
        assert len(result.costs) == 3 and result.provenance.compiler
    assert results[1].device == ""


def test_crashing_and_hanging_candidates_are_isolated_in_the_device_actor(cluster) -> None:
    settings = MeasureSettings(min_repeat_ms=0, run_timeout=1.0, compile_timeout=20.0)
    inputs = [LIGHT, fault("segfault"), fault("hang"), INVALID, fault("compile_error"),
              fault("garble"), LIGHT]
    with RayPool(settings, device_types={"cpu": FaultyCpuDevice}) as pool:
        results, _ = _measure(pool, inputs)
        assert pool.retries == 0  # the actor itself never died
    assert [r.error_kind for r in results] == [
        ErrorKind.NONE, ErrorKind.RUNTIME_ERROR, ErrorKind.RUN_TIMEOUT,
        ErrorKind.INVALID_SCHEDULE, ErrorKind.COMPILE_ERROR, ErrorKind.RUNTIME_ERROR,
        ErrorKind.NONE]
    assert "SIGSEGV" in results[1].error_msg


def test_a_device_that_stops_answering_is_given_up(cluster) -> None:
    settings = MeasureSettings(load_timeout=1.0, run_timeout=1.0)
    with RayPool(settings, device_types={"cpu": UnresponsiveCpuDevice},
                 device_grace_s=0.5) as pool:
        [result], _ = _measure(pool, [LIGHT])
        assert pool.retries == 1
    assert result.error_kind is ErrorKind.DEVICE_LOST
    assert "no live cpu device" in result.error_msg


def test_a_node_killed_mid_batch_loses_nothing(cluster) -> None:
    c = cluster["cluster"]
    cluster["device_nodes"].append(c.add_node(num_cpus=1, resources={"cpu-measure": 1}))
    c.wait_for_nodes()
    nodes = {node.node_id: node for node in cluster["device_nodes"]}

    def kill_the_other_node(first: MeasureResult) -> None:
        # LIGHT went to one device and HEAVY to the other, which is still timing it.
        [other] = [node for node_id, node in nodes.items()
                   if node_id != first.provenance.node]
        c.remove_node(other)
        cluster["device_nodes"].remove(other)

    inputs = [LIGHT, HEAVY, LIGHT, LIGHT, INVALID, LIGHT]
    with RayPool(SETTINGS) as pool:
        results, _ = _measure(pool, inputs, on_first_timed=kill_the_other_node)
        assert pool.retries == 1
    assert [r.error_kind for r in results] == [ErrorKind.NONE] * 4 + [
        ErrorKind.INVALID_SCHEDULE, ErrorKind.NONE]
    [survivor] = cluster["device_nodes"]
    # HEAVY was on the killed node when it died; it was timed again on the survivor.
    assert all(r.provenance.node == survivor.node_id for r in results[1:] if r.ok)


def test_when_the_last_device_dies_the_rest_is_device_lost(cluster) -> None:
    c = cluster["cluster"]
    [last] = cluster["device_nodes"]
    inputs = [LIGHT, HEAVY, LIGHT, INVALID]
    with RayPool(SETTINGS) as pool:
        results, _ = _measure(pool, inputs, on_first_timed=lambda first: c.remove_node(last))
    assert [r.error_kind for r in results] == [
        ErrorKind.NONE, ErrorKind.DEVICE_LOST, ErrorKind.DEVICE_LOST,
        ErrorKind.INVALID_SCHEDULE]
    assert "no live cpu device" in results[1].error_msg
    assert all(r.error_kind.is_infrastructure for r in results[1:3])
