"""A new device slots in without touching the tuner or the search: a simulated device with
its own build and run (a device plugin), a pool made of a new Builder and a new Runner (how
a remote board or a simulator is added), and a new device kind registered with a search
policy for it, each tuned on end to end."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from db import Database
from schedule import Steps, Target, Workload, lower, make_schedule
from search import (
    Candidate,
    SearchPolicy,
    SearchStats,
    SearchTask,
    register_policy,
    unregister_policy,
)
from tests.tuner.fake_devices import LoweredTextDevice
from tuner import SpecError, tune
from workers import (
    Builder,
    BuildResult,
    BuiltCandidate,
    ErrorKind,
    LocalPool,
    MeasureInput,
    MeasurePool,
    MeasureResult,
    MeasureSettings,
    Provenance,
    ResultCallback,
    Runner,
    device_type,
    register_device,
    unregister_device,
)

WORKLOAD = Workload.op("matmul", M=32, N=32, K=32)
SETTINGS = MeasureSettings(repeat=2, min_repeat_ms=1)
ACCEL = "cuda -arch=sm_80"


def simulated_seconds(inp: MeasureInput) -> float:
    """A deterministic stand-in for timing: programs with more parallel and vector loops,
    and fewer statements, are "faster"."""
    s, args = make_schedule(inp.workload, inp.steps)
    text = str(lower(s, args))
    speedup = 1 + text.count("parallel") + 2 * text.count("vectorized")
    return 1e-3 * (1 + text.count("\n") / 100) / speedup


class SimulatedDevice(LoweredTextDevice):
    """A device plugin: builds nothing but the lowered program text, runs nothing but the
    model above."""

    resource = "simulated-measure"

    @property
    def id(self) -> str:
        return "simulated-device"

    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        assert build.library, "the runner got the builder's artefact"
        cost = simulated_seconds(inp)
        return MeasureResult([cost] * settings.repeat, ErrorKind.NONE, device=self.id,
                             provenance=Provenance(device_model="simulator",
                                                   target=str(inp.target)))


class InProcessBuilder(Builder):
    """A builder without processes (it only checks that the steps replay). Its device
    type is what the pool checks inputs against: it measures no baselines."""

    def __init__(self) -> None:
        self.device_types = {"cpu": SimulatedDevice}
        self.built = 0

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        self.built += len(inputs)
        return [SimulatedDevice.build(inp.parsed(), 0.0) for inp in inputs]

    def close(self) -> None:
        return None


class SimulatorRunner(Runner):
    """A runner that "times" on a simulator (where a remote board's runner would send the
    artefact over the network)."""

    def __init__(self, settings: MeasureSettings) -> None:
        self.settings = settings
        self.ran = 0

    def run(self, candidates: Sequence[BuiltCandidate], finish: ResultCallback) -> None:
        for cand in candidates:
            self.ran += 1
            cost = simulated_seconds(cand.input)
            finish(cand.index, MeasureResult([cost], ErrorKind.NONE, device="simulator",
                                             timestamp=time.time(),
                                             provenance=Provenance(device_model="simulator")))

    def close(self) -> None:
        return None


def _check_tuned_on(db: Database, result) -> None:
    assert result.status == "succeeded" and result.trials == 8
    records = db.query_records(job_id=result.job_id)
    assert records and all(r.ok and r.device_model == "simulator" for r in records)
    best = result.best(WORKLOAD)
    by_steps = {r.canonical("steps"): r.median_cost for r in records}
    assert best.latency_s == min(by_steps.values())
    assert best.latency_s == simulated_seconds(MeasureInput(WORKLOAD, Target.parse("cpu"),
                                                            best.steps))


def test_a_device_plugin_is_tuned_on_with_the_local_pool(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'sim.db'}")
    with LocalPool(SETTINGS, devices=[SimulatedDevice()], build_workers=1) as pool:
        result = tune(WORKLOAD, "cpu", trials=8, db=db, pool=pool, batch_size=4,
                      reconfirm=0, cost_model="random")
    _check_tuned_on(db, result)
    db.close()


def test_a_pool_of_a_new_builder_and_runner_is_tuned_on(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'sim.db'}")
    builder, runner = InProcessBuilder(), SimulatorRunner(SETTINGS)
    with MeasurePool(builder, runner) as pool:
        result = tune(WORKLOAD, "cpu", trials=8, db=db, pool=pool, batch_size=4,
                      reconfirm=0, cost_model="random")
    _check_tuned_on(db, result)
    # the 8 trials, and each new best's second look (tuner.second_look)
    looks = sum(len(r.measure.get("looks", [()])) - 1
                for r in db.query_records(job_id=result.job_id))
    assert builder.built == runner.ran == 8 + looks and looks >= 1
    db.close()


class FakeAcceleratorDevice(LoweredTextDevice):
    """A new device kind: an accelerator reached as ``cuda`` targets (standing in for the
    project's cuda device while a test runs: target kinds are a fixed set), whose "time" is
    a function of the schedule's split factor (8 is best)."""

    kind = "cuda"
    resource = "fake-accelerator"

    @property
    def id(self) -> str:
        return "fake-accelerator"

    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        factor = inp.steps[0][3]
        return MeasureResult([1e-3 * (1 + abs(factor - 8))] * settings.repeat, ErrorKind.NONE,
                             device=self.id, provenance=Provenance(
                                 device_model="fake accelerator", target=str(inp.target)))


class SplitSearch(SearchPolicy):
    """A policy for the new kind: the output's first axis split by each divisor."""

    def __init__(self, task: SearchTask, cost_model: str, seed: int = 0,
                 params: object = None) -> None:
        self.task, self.stats, self.measured = task, SearchStats(), {}
        self._queue = []
        extent = task.workload.tensors()[-1].shape[0]
        for factor in (f for f in range(1, extent + 1) if extent % f == 0):
            s, args = make_schedule(task.workload)
            s[args[-1]].split(s[args[-1]].op.axis[0], factor=factor)
            self._queue.append(Candidate(Steps(s.steps)))

    def propose(self, n: int) -> list[Candidate]:
        picks, self._queue = self._queue[:n], self._queue[n:]
        self.stats.proposals += len(picks)
        return picks

    def notify(self, candidates: Sequence[Candidate], costs: Sequence[float | None]) -> None:
        self.measured.update((c.key, cost) for c, cost in zip(candidates, costs, strict=True))


@pytest.fixture
def accelerator_kind() -> Iterator[None]:
    """The fake accelerator stands in for the cuda kind while a test runs; the real cuda
    device is registered again after it."""
    real = device_type("cuda")
    register_device(FakeAcceleratorDevice)
    register_policy("split-search", SplitSearch, target_kinds=("cuda",))
    try:
        yield
    finally:
        unregister_policy("split-search")
        unregister_device("cuda")
        register_device(real)


def test_a_new_device_kind_registered_with_its_policy_is_tuned_on(
        tmp_path: Path, accelerator_kind: None) -> None:
    db = Database(f"sqlite:///{tmp_path / 'accel.db'}")
    with LocalPool(SETTINGS, devices=[device_type("cuda")()], build_workers=1) as pool:
        result = tune(WORKLOAD, ACCEL, trials=6, db=db, pool=pool, batch_size=4,
                      reconfirm=1, policy="split-search", cost_model="random")
    assert result.status == "succeeded" and result.trials == 6
    assert result.target.startswith("cuda")
    records = db.query_records(job_id=result.job_id)
    assert len(records) == 7 and all(r.ok and r.device_model == "fake accelerator"
                                     for r in records)
    assert result.best(WORKLOAD).steps[0][3] == 8  # the factor the device rewards
    db.close()


def test_a_kind_without_a_registered_policy_is_refused_clearly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tuner.spec

    monkeypatch.setattr(tuner.spec, "searchable_kinds", lambda: ["cpu", "vta"])
    with pytest.raises(SpecError, match="only cpu, vta can be tuned"):
        tune(WORKLOAD, ACCEL, trials=2, db=f"sqlite:///{tmp_path / 'x.db'}")
