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
from tuner import side_by_side, tune
from tuner.cli_tune import format_summary, tune_summary
from workers import (
    BuildResult,
    ClusterLostError,
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
    times ``slowdown`` from run ``slow_from`` on and times ``moment(run)`` (the machine's
    speed at that moment), disturbed where ``disturb(run, factor)``."""

    resource = "scripted-measure"

    def __init__(self, disturb=lambda run, factor: False, slow_from: int = 10**9,
                 slowdown: float = 1.0, moment=lambda run: 1.0) -> None:
        super().__init__()
        self.disturb, self.slow_from, self.slowdown = disturb, slow_from, slowdown
        self.moment = moment
        self.runs = 0

    @property
    def id(self) -> str:
        return "scripted"

    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        self.runs += 1
        factor = inp.steps[0][3]
        cost = 1e-3 * factor * (self.slowdown if self.runs >= self.slow_from else 1) \
            * self.moment(self.runs)
        disturbed = self.disturb(self.runs, factor)
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
    db, result = _tune(tmp_path, ScriptedDevice(disturb=lambda run, factor: factor in (16, 4, 1)),
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
    # (run 9: six candidates and each batch's leader looked at again)
    db, result = _tune(tmp_path, ScriptedDevice(slow_from=9, slowdown=1.6))
    task = result.task(WORKLOAD)
    assert not task.confirmed and task.best_cost == pytest.approx(1e-3)  # the record's
    assert "1.60x its record's" in task.unconfirmed
    assert "not confirmed: re-measured" in format_summary(tune_summary(result))
    db.close()


def test_a_disturbed_re_measurement_is_not_confirmed(tmp_path, spy):
    db, result = _tune(tmp_path, ScriptedDevice(disturb=lambda run, factor: run >= 9))
    task = result.task(WORKLOAD)
    assert not task.confirmed and task.best_cost == pytest.approx(1e-3)
    assert "disturbed by other work" in task.unconfirmed
    db.close()


def test_an_agreeing_re_measurement_confirms(tmp_path, spy):
    db, result = _tune(tmp_path, ScriptedDevice(slow_from=9, slowdown=1.03))
    task = result.task(WORKLOAD)
    assert task.confirmed and task.unconfirmed == ""
    assert task.best_cost == pytest.approx(1.03e-3)
    db.close()


def _record_of(db: Database, job_id: str, factor: int):
    (record,) = [r for r in db.query_records(job_id=job_id)
                 if r.steps[0][3] == factor and not r.measure.get("origin", {}).get("reconfirm")]
    return record


def test_a_leader_measured_in_a_fast_moment_keeps_the_middle_of_three_looks(tmp_path, spy):
    # run 3 (factor 8, the first batch's fastest) is timed while the machine is 2x fast;
    # its second look (run 4) disagrees, so a third (run 5) settles it at its real 8 ms
    device = ScriptedDevice(moment=lambda run: 0.5 if run == 3 else 1.0)
    db, result = _tune(tmp_path, device, reconfirm=0)
    record = _record_of(db, result.job_id, 8)
    assert record.median_cost == pytest.approx(8e-3)
    assert record.measure["looks"] == [[4e-3, 4e-3], [8e-3, 8e-3], [8e-3, 8e-3]]
    assert spy.last.learned[:3] == pytest.approx([32e-3, 16e-3, 8e-3])  # not the lucky 4
    assert device.runs == 6 + 2 + 1  # the candidates, batch 1's two more looks, batch 2's one
    db.close()


def test_agreeing_looks_keep_the_repeats_of_both(tmp_path, spy):
    db, result = _tune(tmp_path, ScriptedDevice(moment=lambda run: 1.05 if run == 4 else 1.0),
                       reconfirm=0)
    record = _record_of(db, result.job_id, 8)
    assert record.costs == pytest.approx([8e-3, 8e-3, 8.4e-3, 8.4e-3])
    assert len(record.measure["looks"]) == 2
    # what does not lead is measured once
    assert "looks" not in _record_of(db, result.job_id, 16).measure
    assert result.task(WORKLOAD).best_cost == pytest.approx(1e-3)
    db.close()


def test_a_disturbed_second_look_leaves_the_first_figure(tmp_path, spy):
    db, result = _tune(tmp_path, ScriptedDevice(disturb=lambda run, factor: run == 4),
                       reconfirm=0)
    record = _record_of(db, result.job_id, 8)
    assert record.costs == pytest.approx([8e-3, 8e-3]) and "looks" not in record.measure
    db.close()


def test_a_look_the_cluster_fails_loses_none_of_the_batch(tmp_path, spy):
    """The cluster goes away during a second look: the job fails saying so, and every
    first figure of the batch is stored."""

    class LosesTheClusterOnTheLook(LocalPool):
        def measure(self, inputs, callback=None):
            if len(inputs) == 1:
                raise ClusterLostError("the Ray head stopped answering")
            return super().measure(inputs, callback)

    db = Database(f"sqlite:///{tmp_path / 'lost.db'}")
    with LosesTheClusterOnTheLook(SETTINGS, devices=[ScriptedDevice()], build_workers=1) as pool:
        result = tune(WORKLOAD, "cpu", trials=6, db=db, pool=pool, batch_size=3, reconfirm=0,
                      policy="spy", cost_model="random")
    assert result.status == "failed" and "measurement cluster lost" in result.error
    records = db.query_records(job_id=result.job_id)
    assert sorted(r.steps[0][3] for r in records) == [8, 16, 32]
    assert all("looks" not in r.measure for r in records)
    db.close()


# --- the end-of-job comparison side by side ----------------------------------------------


def test_a_leader_measured_in_a_fast_minute_is_outranked_side_by_side(tmp_path, spy):
    # factor 2 (really 2 ms) is timed, both looks, while the machine runs 2.5x fast (runs
    # 6 and 8), so its record (0.8 ms) ranks ahead of factor 1's (1 ms); side by side at
    # the end (runs 9-14) it takes twice factor 1's time
    device = ScriptedDevice(moment=lambda run: 0.4 if run in (6, 8) else 1.0)
    db, result = _tune(tmp_path, device, reconfirm=2)
    fast_minute, really_fastest = _record_of(db, result.job_id, 2), _record_of(db, result.job_id, 1)
    assert fast_minute.median_cost == pytest.approx(0.8e-3)
    assert device.runs == 8 + 2 * side_by_side.ROUNDS
    task = result.task(WORKLOAD)
    assert task.best_steps.to_json()[0][3] == 1
    assert task.confirmed and task.best_cost == pytest.approx(1e-3)
    verdict = db.outranked([fast_minute.measurement_id])[fast_minute.measurement_id]
    assert verdict.by_measurement_id == really_fastest.measurement_id
    assert verdict.ratio == pytest.approx(2.0) and verdict.job_id == result.job_id
    best = db.best(WORKLOAD.key, result.target).best
    assert best.measurement_id == really_fastest.measurement_id
    assert "ranked side by side: 1 program(s) whose records were faster took up to 2.00x" in \
        format_summary(tune_summary(result))
    # a later job on this database starts from the program that was faster side by side
    with LocalPool(SETTINGS, devices=[ScriptedDevice()], build_workers=1) as pool:
        later = tune(WORKLOAD, "cpu", trials=3, db=db, pool=pool, batch_size=3, reconfirm=0,
                     policy="spy", cost_model="random").task(WORKLOAD)
    assert later.best_steps.to_json()[0][3] == 1 and later.best_cost == pytest.approx(1e-3)
    db.close()


def test_a_slower_program_re_measured_in_a_fast_moment_is_outranked_too(tmp_path, spy):
    # as above, and the last round's look at factor 2 (run 13) is taken 5x fast: 0.4 ms,
    # ahead of every other record; its program lost two rounds of three, so it goes too
    device = ScriptedDevice(moment=lambda run: 0.4 if run in (6, 8) else (
        0.2 if run == 13 else 1.0))
    db, result = _tune(tmp_path, device, reconfirm=2)
    records = [r for r in db.query_records(workload_key=WORKLOAD.key) if r.steps[0][3] == 2]
    outranked = db.outranked(r.measurement_id for r in records)
    assert sorted(r.median_cost for r in records
                  if r.measurement_id in outranked) == pytest.approx([0.4e-3, 0.8e-3])
    assert db.best(WORKLOAD.key, result.target).best.steps[0][3] == 1
    assert result.task(WORKLOAD).best_steps.to_json()[0][3] == 1
    db.close()


def test_side_by_side_the_record_leader_keeps_its_place_within_the_margin(tmp_path, spy):
    # as above, but side by side factor 2 runs at 1.01 ms (runs 9, 11, 13): factor 1 is
    # faster by less than the margin, so the record leader stays
    device = ScriptedDevice(moment=lambda run: 0.4 if run in (6, 8) else (
        0.505 if run > 8 and run % 2 == 1 else 1.0))
    db, result = _tune(tmp_path, device, reconfirm=2)
    task = result.task(WORKLOAD)
    assert task.best_steps.to_json()[0][3] == 2 and task.reranked == ""
    assert not task.confirmed  # 1.01 ms side by side against its record's 0.8 ms
    assert db.outranked(r.measurement_id for r in db.query_records(job_id=result.job_id)) == {}
    db.close()


def test_side_by_side_rounds_whose_leader_was_disturbed_compare_nothing(tmp_path, spy):
    # the record leader (factor 2) is disturbed in every round at the end
    device = ScriptedDevice(moment=lambda run: 0.4 if run in (6, 8) else 1.0,
                            disturb=lambda run, factor: run > 8 and factor == 2)
    db, result = _tune(tmp_path, device, reconfirm=2)
    task = result.task(WORKLOAD)
    assert task.best_steps.to_json()[0][3] == 2 and not task.confirmed
    assert "disturbed by other work" in task.unconfirmed
    assert db.best(WORKLOAD.key, result.target).best.median_cost == pytest.approx(0.8e-3)
    db.close()


class AnotherJobMeanwhile(ScriptedDevice):
    """A scripted device during whose run 9 (the end-of-job comparison's first round)
    another job stores a record of factor 4 at 0.1 ms in ``db``."""

    db: Database

    def run(self, build, inp, settings):
        result = super().run(build, inp, settings)
        if self.runs == 9:
            (mine,) = [r for r in self.db.query_records() if r.steps[0][3] == 4]
            other = {**mine.to_dict(with_id=False), "costs": [1e-4, 1e-4],
                     "timestamp": mine.timestamp + 1, "job_id": "another-job"}
            self.db.add_records([other])
        return result


def test_records_another_job_stores_during_the_comparison_are_left_alone(tmp_path, spy):
    """Two jobs on one database: a faster program of another job, stored while this job
    compares its leaders, is neither outranked nor taken as this job's best."""
    device = AnotherJobMeanwhile(moment=lambda run: 0.4 if run in (6, 8) else 1.0)
    device.db = Database(f"sqlite:///{tmp_path / 'shared.db'}")
    with LocalPool(SETTINGS, devices=[device], build_workers=1) as pool:
        result = tune(WORKLOAD, "cpu", trials=6, db=device.db, pool=pool, batch_size=3,
                      reconfirm=2, policy="spy", cost_model="random")
    assert result.status == "succeeded", result.error
    task = result.task(WORKLOAD)
    assert task.best_steps.to_json()[0][3] == 1 and task.confirmed
    best = device.db.best(WORKLOAD.key, result.target).best
    assert best.job_id == "another-job" and best.steps[0][3] == 4
    device.db.close()
