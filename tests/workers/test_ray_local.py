"""The Ray pool's embedded default: with no address (argument or TENSORTUNE_RAY_ADDRESS) it
starts Ray on this machine, sized to it and advertising this machine's CPU device, and
measures like the local pool."""

from __future__ import annotations

import os

import pytest

from workers import RAY_ADDRESS_ENV, ErrorKind, MeasureInput, MeasureSettings

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.ray

WORKLOAD = {"op": "matmul", "params": {"M": 48, "N": 48, "K": 48}}


def test_an_embedded_ray_measures_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from workers import RayPool

    monkeypatch.delenv(RAY_ADDRESS_ENV, raising=False)
    assert not ray.is_initialized()
    steps = [["split", "T_matmul", "j", 16], ["vectorize", "T_matmul", "j.inner"]]
    inputs = [MeasureInput(WORKLOAD, "cpu", steps),
              MeasureInput(WORKLOAD, "cpu", [["unroll", "T_matmul", "k"], ["bogus"]]),
              MeasureInput(WORKLOAD, "cpu", steps)]
    with RayPool(MeasureSettings(min_repeat_ms=5)) as pool:
        resources = ray.cluster_resources()
        assert resources["cpu-measure"] == 1
        assert resources["CPU"] == os.cpu_count()
        results = pool.measure(inputs)
    assert not ray.is_initialized()  # the pool started Ray, so it stopped it
    assert [r.error_kind for r in results] == [
        ErrorKind.NONE, ErrorKind.INVALID_SCHEDULE, ErrorKind.NONE]
    assert "unknown step 'bogus'" in results[1].error_msg
    assert results[0].provenance.node
    assert len(results[2].costs) == 3, results[2]  # (or the thirds of short repeats)


def test_the_cluster_address_comes_from_the_argument_or_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from workers.ray_pool import ray_address

    monkeypatch.delenv(RAY_ADDRESS_ENV, raising=False)
    assert ray_address() is None
    assert ray_address("head:6379") == "head:6379"
    monkeypatch.setenv(RAY_ADDRESS_ENV, "cluster:6379")
    assert ray_address() == "cluster:6379"
    assert ray_address("other:1") == "other:1"


def test_an_embedded_ray_proxies_to_the_vta_boards_named_here(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Each board named in TENSORTUNE_VTA_BOARDS is one ``fpga`` resource, whose device
    actor sends its candidates to that board's device server."""
    from schedule import Workload, vta
    from tests.workers.test_device_server import Server
    from workers import RayPool

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Server(tmp_path / "a")
    second = Server(tmp_path / "b", key=first.key)
    try:
        monkeypatch.delenv(RAY_ADDRESS_ENV, raising=False)
        monkeypatch.setenv("TENSORTUNE_VTA_BOARDS", f"{first.address},{second.address}")
        monkeypatch.setenv("TENSORTUNE_DEVICE_KEY_FILE", str(first.key_file))
        dense = Workload.op("dense", M=16, N=64, K=64, dtype="int8", bias=False,
                            requant_shift=6)
        compute = vta.VtaCompute(dense, vta.VtaConfig())
        steps = [list(s) for s in compute.template_steps(vta.Template(8, 2, 2, 2, "m"))]
        with RayPool(MeasureSettings(repeat=1)) as pool:
            assert ray.cluster_resources()["fpga"] == 2
            results = pool.measure([MeasureInput(dense, "vta", steps)] * 4)
        assert all(r.ok for r in results), [r.error_msg for r in results]
        assert {r.device for r in results} <= {f"vta@{first.address}",
                                               f"vta@{second.address}"}
        assert all("board" in r.provenance.device_model for r in results)
    finally:
        first.stop()
        second.stop()
