"""Compiling a model with the tuned schedules: ``tensortune tasks``, ``tune`` of the model's
tasks, ``tensortune compile`` (hits, misses, --strict) and ``tensortune run`` on the
artefact, checked against onnxruntime."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import tuner  # noqa: E402

from ..onnx_models import save_small_cnn as small_cnn  # noqa: E402

RNG = np.random.default_rng(5)


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True,
                          text=True, timeout=600, check=check)


def test_tasks_compile_tune_and_run(tmp_path):
    model = small_cnn(tmp_path / "cnn.onnx")
    db = f"sqlite:///{tmp_path / 'tuning.db'}"
    tasks = json.loads(cli("tasks", model, "--db", db, "--json").stdout)["tasks"]
    # the conv runs on packed channels: the image is packed on the way in, and the pooled
    # result unpacked on its way to the reshape
    assert [t["ops"] for t in tasks] == [["layout_transform"],
                                         ["nn.conv2d_nchwc", "add", "nn.relu"],
                                         ["nn.global_avg_pool2d"],
                                         ["layout_transform", "reshape"],
                                         ["nn.dense", "nn.bias_add"]]
    assert not any(t["tuned"] for t in tasks)
    assert sum(t["flops_share"] for t in tasks) == pytest.approx(1.0)

    strict = cli("compile", model, "--db", db, "--strict", "-o", str(tmp_path / "m.tt"),
                 check=False)
    assert strict.returncode != 0 and "no tuning record" in strict.stderr

    # tune the conv task only: it is a hit, the rest are misses
    conv = next(t["workload"] for t in tuner.model_tasks(model)
                if t["ops"][0] == "nn.conv2d_nchwc")
    tuner.tune([conv], trials=4, db=db)
    out = json.loads(cli("compile", model, "--db", db, "-o", str(tmp_path / "m.tt"),
                         "--json").stdout)
    tuned = {t["name"]: t["tuned"] for t in out["tasks"]}
    assert tuned["fused_conv2d_nchwc_add_relu"] and not tuned["fused_dense_bias_add"]
    assert 0.5 < out["tuned_flops_share"] < 1

    image = RNG.standard_normal((1, 3, 8, 8)).astype("float32")
    np.savez(tmp_path / "in.npz", image=image)
    run = json.loads(cli("run", str(tmp_path / "m.tt"), "--inputs", str(tmp_path / "in.npz"),
                         "--output", str(tmp_path / "out.npz"), "--repeat", "3",
                         "--json").stdout)
    assert run["executor"] == "graph" and run["latency_s"] > 0
    got = np.load(tmp_path / "out.npz")["logits"]
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"image": image})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_bad_model_and_bad_inputs_are_clear_errors(tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x07garbage")
    result = cli("compile", str(broken), "-o", str(tmp_path / "x.tt"), check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    result = cli("tasks", str(tmp_path / "missing.onnx"), check=False)
    assert result.returncode != 0 and "no model file" in result.stderr
    model = small_cnn(tmp_path / "cnn.onnx")
    cli("compile", model, "--db", f"sqlite:///{tmp_path / 'db.db'}", "-o",
        str(tmp_path / "m.tt"))
    np.savez(tmp_path / "in.npz", wrong=np.zeros(3, "float32"))
    result = cli("run", str(tmp_path / "m.tt"), "--inputs", str(tmp_path / "in.npz"),
                 check=False)
    assert result.returncode != 0 and "missing input 'image'" in result.stderr


def test_aot_artefact_compiles_and_runs(tmp_path):
    model = small_cnn(tmp_path / "cnn.onnx")
    out = json.loads(cli("compile", model, "--db", f"sqlite:///{tmp_path / 'db.db'}",
                         "--executor", "aot", "-o", str(tmp_path / "m.aot"), "--json").stdout)
    assert out["executor"] == "aot" and (tmp_path / "m.aot").is_dir()
    assert out["memory"]["activation_bytes_planned"] > 0
    image = RNG.standard_normal((1, 3, 8, 8)).astype("float32")
    np.savez(tmp_path / "in.npz", image=image)
    run = json.loads(cli("run", str(tmp_path / "m.aot"), "--inputs", str(tmp_path / "in.npz"),
                         "--output", str(tmp_path / "out.npz"), "--repeat", "3",
                         "--json").stdout)
    assert run["executor"] == "aot" and run["latency_s"] > 0
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"image": image})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["logits"], want, rtol=1e-4,
                               atol=1e-5)


def test_bad_executor_and_a_directory_that_is_not_an_artefact(tmp_path):
    model = small_cnn(tmp_path / "cnn.onnx")
    with pytest.raises(tuner.CompileError, match="unknown executor 'jit'"):
        tuner.compile(model, "cpu", f"sqlite:///{tmp_path / 'db.db'}", executor="jit")
    (tmp_path / "empty.aot").mkdir()
    np.savez(tmp_path / "in.npz", image=np.zeros((1, 3, 8, 8), "float32"))
    result = cli("run", str(tmp_path / "empty.aot"), "--inputs", str(tmp_path / "in.npz"),
                 check=False)
    assert result.returncode != 0 and "cannot load" in result.stderr
    assert "Traceback" not in result.stderr
