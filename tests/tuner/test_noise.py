"""A tuner that other work on the machine does not fool: figures the device marks disturbed
are kept out of the cost model (and said in the summary), and the final re-measurement
confirms a best figure only if it agrees with its record within the noise measured."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from db import Database
from schedule import Steps, Workload, make_schedule
from search import (
    Candidate,
    SearchPolicy,
    SearchStats,
    SearchTask,
    register_policy,
    unregister_policy,
)
from tests.tuner.fake_devices import LoweredTextDevice
from tuner import tune
from tuner.cli_tune import format_summary, tune_summary
from workers import (
    BuildResult,
    ErrorKind,
    LocalPool,
    MeasureInput,
    MeasureResult,
    MeasureSettings,
    Provenance,
)

WORKLOAD = Workload.op("matmul", M=32, N=32, K=32)
SETTINGS = MeasureSettings(repeat=2, min_repeat_ms=1)


class ScriptedDevice(LoweredTextDevice):
    """Answers each run with a cost from the program's split factor (1 ms per factor),
    times ``slowdown`` from run ``slow_from`` on, and disturbed where ``disturb(run)``."""

    resource = "scripted-measure"

    def __init__(self, disturb=lambda run: False, slow_from: int = 10**9,
                 slowdown: float = 1.0) -> None:
        super().__init__()
        self.disturb, self.slow_from, self.slowdown = disturb, slow_from, slowdown
        self.runs = 0

    @property
    def id(self) -> str:
        return "scripted"

    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        self.runs += 1
        cost = 1e-3 * inp.steps[0][3] * (self.slowdown if self.runs >= self.slow_from else 1)
        disturbed = self.disturb(self.runs)
        return MeasureResult([cost] * settings.repeat, ErrorKind.NONE, device=self.id,
                             provenance=Provenance(device_model="scripted"),
                             noise=2.0 if disturbed else 1.02, disturbed=disturbed)


class Spy(SearchPolicy):
    """Proposes the output's first axis split by each factor, largest first; records what
    it is told."""

    def __init__(self, task: SearchTask, cost_model: str, seed: int = 0,
                 params: object = None) -> None:
        self.task, self.stats = task, SearchStats()
        self.learned: list[float | None] = []
        self.disturbed: list[float | None] = []
        self._queue = []
        for factor in (32, 16, 8, 4, 2, 1):
            s, args = make_schedule(task.workload)
            s[args[-1]].split(s[args[-1]].op.axis[0], factor=factor)
            self._queue.append(Candidate(Steps(s.steps)))
        Spy.last = self

    def propose(self, n: int) -> list[Candidate]:
        picks, self._queue = self._queue[:n], self._queue[n:]
        return picks

    def notify(self, candidates: Sequence[Candidate], costs: Sequence[float | None]) -> None:
        self.learned += costs

    def notify_disturbed(self, candidates: Sequence[Candidate],
                         costs: Sequence[float | None]) -> None:
        self.disturbed += costs


@pytest.fixture
def spy() -> type[Spy]:
    register_policy("spy", Spy)
    yield Spy
    unregister_policy("spy")


def _tune(tmp_path: Path, device: ScriptedDevice, reconfirm: int = 1):
    db = Database(f"sqlite:///{tmp_path / 'noise.db'}")
    with LocalPool(SETTINGS, devices=[device], build_workers=1) as pool:
        result = tune(WORKLOAD, "cpu", trials=6, db=db, pool=pool, batch_size=3,
                      reconfirm=reconfirm, policy="spy", cost_model="random")
    return db, result


def test_disturbed_figures_are_stored_and_counted_but_not_learnt_from(tmp_path, spy):
    db, result = _tune(tmp_path, ScriptedDevice(disturb=lambda run: run % 2 == 0),
                       reconfirm=0)
    assert result.status == "succeeded"
    assert len(spy.last.learned) == 3 and len(spy.last.disturbed) == 3
    task = result.task(WORKLOAD)
    assert task.disturbed == 3 and task.max_noise == 2.0
    records = db.query_records(job_id=result.job_id)
    assert sorted(r.measure.get("disturbed", False) for r in records) == [False] * 3 + [True] * 3
    assert all(r.measure["noise"] in (1.02, 2.0) for r in records)
    text = format_summary(tune_summary(result))
    assert "the machine was busy: 3 of 6 figures stayed disturbed" in text
    db.close()


def test_a_re_measurement_that_disagrees_with_the_record_is_not_confirmed(tmp_path, spy):
    # the machine turns 1.6x slower (unnoticed by its checks) for the final re-measurement
    db, result = _tune(tmp_path, ScriptedDevice(slow_from=7, slowdown=1.6))
    task = result.task(WORKLOAD)
    assert not task.confirmed and task.best_cost == pytest.approx(1e-3)  # the record's
    assert "1.60x its record's" in task.unconfirmed
    assert "not confirmed: re-measured" in format_summary(tune_summary(result))
    db.close()


def test_a_disturbed_re_measurement_is_not_confirmed(tmp_path, spy):
    db, result = _tune(tmp_path, ScriptedDevice(disturb=lambda run: run >= 7))
    task = result.task(WORKLOAD)
    assert not task.confirmed and task.best_cost == pytest.approx(1e-3)
    assert "disturbed by other work" in task.unconfirmed
    db.close()


def test_an_agreeing_re_measurement_confirms(tmp_path, spy):
    db, result = _tune(tmp_path, ScriptedDevice(slow_from=7, slowdown=1.03))
    task = result.task(WORKLOAD)
    assert task.confirmed and task.unconfirmed == ""
    assert task.best_cost == pytest.approx(1.03e-3)
    db.close()
