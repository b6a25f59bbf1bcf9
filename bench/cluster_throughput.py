"""Throughput of the Ray pool as devices are added: candidates timed per minute with 1, 2,
4 and 8 device actors spread over up to 4 worker nodes of a real Ray cluster
(``ray.cluster_utils.Cluster``), each device a simulated one that takes a fixed time per
candidate (bench/simulated_device.py), so that this machine's 2 cores do not bound it.
Builds are trivial and happen before each batch is timed (as in every pool), so the timed
phase is the scheduler's alone.

Prints, per device count: candidates per minute, the ratio to one device's rate times the
device count (1.0 is linear), and the scheduler's overhead per candidate: the device time
lost to it, ``(wall - ideal) * devices / candidates`` with the ideal wall time
``batches * ceil(batch / devices) * latency``.

    .venv/bin/python bench/cluster_throughput.py [--latency 0.2] [--batch 64] [--batches 3]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# The nodes' worker processes import the simulated device (bench.simulated_device).
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO),
                                                         os.environ.get("PYTHONPATH")]))

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from bench.simulated_device import LATENCY_ENV, SimulatedDevice  # noqa: E402
from workers import MeasureInput, MeasureSettings  # noqa: E402
from workers.ray_pool import RayPool  # noqa: E402

MAX_NODES = 4


def _inputs(batch: int, offset: int) -> list[MeasureInput]:
    """Distinct candidates (distinct workloads: none is built once for two)."""
    return [MeasureInput({"op": "matmul", "params": {"M": 8 + offset + n, "N": 8, "K": 8}},
                         "cpu", []) for n in range(batch)]


def run(devices: int, latency: float, batch: int, batches: int) -> dict[str, float]:
    nodes = min(devices, MAX_NODES)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    for n in range(nodes):
        share = devices // nodes + (1 if n < devices % nodes else 0)
        cluster.add_node(num_cpus=1, resources={"sim-measure": share})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="ERROR")
    try:
        with RayPool(MeasureSettings(), device_types={"cpu": SimulatedDevice}) as pool:
            pool.measure(_inputs(devices, 10_000))  # start the device actors
            assert len(pool.devices()) == devices, pool.devices()
            timed = 0.0
            for b in range(batches):
                inputs = _inputs(batch, b * batch)
                started = time.perf_counter()
                results = pool.measure(inputs)
                timed += time.perf_counter() - started
                assert all(r.ok for r in results), {r.error_msg for r in results}
    finally:
        ray.shutdown()
        cluster.shutdown()
    candidates = batch * batches
    ideal = batches * math.ceil(batch / devices) * latency
    # device time lost per candidate: every device idle while the pool is not timing on it
    overhead = (timed - ideal) * devices / candidates
    return {"per_minute": candidates / timed * 60, "overhead_ms": overhead * 1e3,
            "seconds": timed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per candidate")
    parser.add_argument("--batch", type=int, default=64, help="candidates per batch")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--devices", default="1,2,4,8")
    args = parser.parse_args()
    os.environ[LATENCY_ENV] = str(args.latency)
    print(f"simulated device: {args.latency * 1e3:.0f} ms per candidate; {args.batches} "
          f"batches of {args.batch}; up to {MAX_NODES} worker nodes")
    print(f"{'devices':>7} {'nodes':>5} {'cand/min':>9} {'vs linear':>9} "
          f"{'lost/cand':>12} {'seconds':>8}")
    single = None
    for devices in map(int, args.devices.split(",")):
        row = run(devices, args.latency, args.batch, args.batches)
        single = single or row["per_minute"] / devices
        print(f"{devices:>7} {min(devices, MAX_NODES):>5} {row['per_minute']:>9.0f} "
              f"{row['per_minute'] / (single * devices):>9.2f} "
              f"{row['overhead_ms']:>9.1f} ms {row['seconds']:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
