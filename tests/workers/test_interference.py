"""Interference detection on the cpu device: the other work's CPU use over a timing window
(from /proc/stat), the noise figure, and a real busy process making a candidate's figure
disturbed after the device measured it again."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schedule import Steps, Workload
from workers import MeasureInput, MeasureSettings, interference
from workers.cpu import CpuDevice
from workers.interference import thread_stats

LINUX = Path("/proc/stat").exists()


class _Clock:
    def __init__(self) -> None:
        self.wall, self.own = 0.0, 0.0

    def perf_counter(self) -> float:
        return self.wall

    def process_time(self) -> float:
        return self.own


def _stat(path: Path, busy_ticks: int) -> None:
    # cpu user nice system idle iowait irq softirq steal guest guest_nice
    path.write_text(f"cpu  {busy_ticks} 0 0 500000 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")


def test_the_other_load_is_the_machine_busy_time_less_this_process_and_the_margin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat, clock = tmp_path / "stat", _Clock()
    monkeypatch.setattr(interference, "_STAT", str(stat))
    monkeypatch.setattr(interference, "time", clock)
    hz, cores = os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    _stat(stat, 1000)
    window = interference.Window.start()
    # 2 s later: this process used 3 CPU-seconds, the machine 5 + the margin's ticks
    clock.wall, clock.own = 2.0, 3.0
    _stat(stat, 1000 + 5 * hz + 2 * cores)
    assert window.other_load() == pytest.approx(1.0)  # one core's worth of other work
    _stat(stat, 1000 + 3 * hz)  # nothing but this process: within the margin, 0
    assert window.other_load() == 0.0
    stat.write_text("not a stat file\n")
    assert window.other_load() is None


def test_noise_is_the_worse_of_the_spread_and_the_load() -> None:
    assert interference.noise([1.0, 1.1], 0.0) == pytest.approx(1.1)
    assert interference.noise([1.0, 1.0], 0.6) == pytest.approx(1.6)
    assert interference.noise([1.0, 1.3], None) == pytest.approx(1.3)
    assert interference.noise([5e-324, 1.0], None) == interference.MAX_NOISE  # bounded


@pytest.mark.skipif(not LINUX, reason="needs /proc/stat")
def test_a_busy_process_makes_the_figure_disturbed_after_re_measuring() -> None:
    workload = Workload.op("matmul", M=128, N=128, K=128)
    device = CpuDevice()
    inp = MeasureInput(workload, device.target, Steps.of([])).parsed()
    build = CpuDevice.build(inp, 60.0)
    settings = MeasureSettings(repeat=3, min_repeat_ms=40, remeasure=2)
    calls = []
    call = device._sandbox.call
    device._sandbox.call = lambda *a, **k: calls.append(a[0]) or call(*a, **k)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        result = device.run(build, inp, settings)
    finally:
        busy.kill()
        busy.wait()
        device.close()
    assert result.ok and result.disturbed and result.noise > settings.noise_tolerance
    assert calls.count("workers.cpu:time_kernel") == 3  # measured, then twice again


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs schedstat")
def test_run_delay_counts_the_time_a_thread_waited_for_its_core() -> None:
    """This process and a busy child pinned to one core: the kernel makes this thread wait
    while the child runs, and says so."""
    core = min(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(busy.pid, {core})
        os.sched_setaffinity(0, {core})
        before = interference.run_delay()
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            pass
        waited = interference.run_delay() - before
    finally:
        os.sched_setaffinity(0, mine)
        busy.kill()
        busy.wait()
    assert waited > 0.03  # about half of the 0.3 s: the child's share of the core


def _short_answer(alone: list[float], waiting: int, stolen: float | None = 0.0) -> dict:
    """A short-repeat answer: ``alone`` ran alone, ``waiting`` more waited for a core."""
    costs = alone + [9.0] * waiting
    waits = [0.0] * len(alone) + [0.5] * waiting
    return {"costs": costs, "waits": waits, "stolen": stolen}


def test_the_short_repeats_figure_is_all_those_that_ran_alone() -> None:
    """Slow ones too: keeping only those near the fastest read under a quiet re-time."""
    from workers.cpu import unpreempted

    assert unpreempted([1.0, 9.0, 1.3, 1.1], [0.0, 0.5, 0.01, 0.0]) == [1.0, 1.3, 1.1]
    assert unpreempted([9.0, 2.0], [0.5, 0.02]) == []  # none ran alone


def test_a_short_figure_s_repeats_are_the_means_of_its_interleaved_thirds() -> None:
    """As the standard timing's repeats are each the mean of its calls."""
    from workers.cpu import short_figure

    assert short_figure([1.0, 2.0, 1.0, 1.0, 2.0, 4.0]) == [1.0, 2.0, 2.5]
    assert short_figure([1.0, 1.1]) == [1.0, 1.1]
    assert short_figure([]) == []


def test_a_short_repeat_answer_is_trusted_only_whole_and_with_nothing_stolen() -> None:
    from workers.cpu import SHORT_REPEATS_MAX

    read = CpuDevice._short_answer
    answer = _short_answer([1.0] * 6, waiting=30)
    assert read(answer) == (answer["costs"], answer["waits"])
    assert read({**answer, "stolen": 0.2}) is None  # the hypervisor took time
    assert read({**answer, "stolen": None}) is None  # unknown: not trusted
    assert read({**answer, "waits": None}) is None  # no schedstat
    assert read({**answer, "costs": answer["costs"][:-1]}) is None  # malformed
    assert read({**answer, "costs": [], "waits": []}) is None
    too_many = [1.0] * (SHORT_REPEATS_MAX + 1)
    assert read({"costs": too_many, "waits": [0.0] * len(too_many), "stolen": 0.0}) is None
    assert read({**answer, "costs": [float("inf"), *answer["costs"][1:]]}) is None
    assert read("not a dict") is None


def _parallel_matmul() -> MeasureInput:
    import random

    from search import SearchTask, generate_sketches, instantiate, sampler

    workload = Workload.op("matmul", M=64, N=64, K=64)
    task = SearchTask(workload, "cpu")
    s, _ = instantiate(task, generate_sketches(task)[0],
                       sampler({"parallel:T_matmul": 1}, {}, random.Random(0)))
    assert any(step[0] == "parallel" for step in s.steps)
    return MeasureInput(workload, task.target, Steps.of(s.steps)).parsed()


def test_a_machine_that_stays_busy_is_timed_in_short_repeats_that_ran_alone() -> None:
    """The first timing says other work ran (load 1.0): the device times short repeats,
    and all that ran alone make the figure; where too few did, it tries again, then keeps
    the figure disturbed."""
    from workers.cpu import MIN_UNPREEMPTED, short_figure
    from workers.sandbox import Outcome

    device = CpuDevice()
    inp = _parallel_matmul()
    build = CpuDevice.build(inp, 60.0)
    settings = MeasureSettings(repeat=3, min_repeat_ms=1, remeasure=2)
    real = device._sandbox.call
    answers: list[dict] = []
    calls: list[str] = []

    def call(name, job, **kwargs):
        outcome = real(name, job, **kwargs)  # the real kernel runs (and is checked)
        if name != "workers.cpu:time_kernel":
            return outcome
        calls.append("short" if job.get("short_repeats") else "standard")
        value = answers.pop(0) if job.get("short_repeats") else {
            "costs": outcome.value["costs"], "load": 1.0}
        return Outcome("ok", value, outcome.blobs)

    def alone(n: int) -> list[float]:
        return [(1.0 + 0.2 * (i % 2)) * 1e-4 for i in range(n)]

    device._sandbox.call = call
    try:
        answers[:] = [_short_answer(alone(MIN_UNPREEMPTED), waiting=20)]
        result = device.run(build, inp, settings)
        assert calls == ["standard", "short"]
        assert result.ok and not result.disturbed
        assert result.unpreempted == MIN_UNPREEMPTED
        assert result.costs == short_figure(alone(MIN_UNPREEMPTED))
        assert result.noise < 1.2  # the spread of the thirds' means, not of single calls

        calls.clear()
        answers[:] = [_short_answer([1e-4] * 2, waiting=30)] * 2
        result = device.run(build, inp, settings)
        assert calls == ["standard", "short", "short"]
        assert result.ok and result.disturbed and result.unpreempted == 0

        # the tries add up: some ran alone in the first, the rest in the second
        calls.clear()
        first = MIN_UNPREEMPTED // 2
        answers[:] = [_short_answer(alone(first), waiting=30),
                      _short_answer(alone(MIN_UNPREEMPTED - first), waiting=30)]
        result = device.run(build, inp, settings)
        assert calls == ["standard", "short", "short"]
        assert result.ok and not result.disturbed and result.unpreempted == MIN_UNPREEMPTED
        assert result.costs == short_figure(alone(first) + alone(MIN_UNPREEMPTED - first))

        # they ran alone but a third of them twice as slow: the figure stays disturbed
        calls.clear()
        unsteady = [1e-4, 1e-4, 2e-4] * 4
        answers[:] = [_short_answer(unsteady, waiting=3)] * 2
        result = device.run(build, inp, settings)
        assert calls == ["standard", "short", "short"]
        assert result.ok and result.disturbed
    finally:
        device.close()


def _short_repeat_job(tmp_path: Path, **short) -> dict:
    inp = _parallel_matmul()
    build = CpuDevice.build(inp, 60.0)
    library = tmp_path / "kernel.so"
    library.write_bytes(build.library)
    return {"library": str(library), "signature": build.signature,
            "workload": inp.workload.to_json(), "seed": 0, "check": False, "flush_bytes": 0,
            **short}


def test_a_short_repeat_s_warm_up_call_is_outside_the_window_watched_for_waiting(
        monkeypatch) -> None:
    """Only the timed calls are watched: a window that also held the warm-up call was
    twice as long, and far fewer repeats ran alone beside a busy loop. The timing loop is
    given the warm-up call's time, from which it plans its calls."""
    from workers import cpu

    events: list[str] = []

    class Kernel:
        def __call__(self, *arrays) -> None:
            events.append("warm-up")
            time.sleep(2e-4)

        def time(self, *arrays, number, repeat, min_repeat_ms, flush_bytes, warm_s):
            events.append(f"timed after a warm-up of {warm_s} s")
            return [2e-4] * repeat

    def watched(call):
        events.append("watch")
        value = call()
        events.append("unwatch")
        return value, 0.0

    monkeypatch.setattr(cpu, "waiting_share", watched)
    monkeypatch.setattr(cpu, "helpers_of", lambda call: [])
    job = {"short_repeats": 3, "short_seconds": 60.0, "flush_bytes": 0}
    value = cpu.time_short_repeats(Kernel(), [], job, interference.Window.start())
    assert value["costs"] == [2e-4] * 3 and value["waits"] == [0.0] * 3
    assert events[0::4] == ["warm-up"] * 3 and events[1::4] == ["watch"] * 3
    assert events[3::4] == ["unwatch"] * 3
    warm_times = [float(e.split()[-2]) for e in events[2::4]]
    assert all(2e-4 <= w < 1.0 for w in warm_times)  # the warm-up slept 0.2 ms


def test_module_timing_can_leave_the_warm_up_call_to_its_caller() -> None:
    import numpy as np

    from schedule import build, make_schedule

    s, tensors = make_schedule(Workload.op("matmul", M=64, N=64, K=64), [])
    mod = build(s, tensors)
    arrays = [np.ones([int(d) for d in t.shape], dtype="float32") for t in tensors]
    for warm_s in (None, 1e-3):
        arrays[-1][:] = 0.0
        costs = mod.time(*arrays, number=1, repeat=2, min_repeat_ms=0, warm_s=warm_s)
        assert len(costs) == 2 and all(0 < c < 1 for c in costs)
        assert np.allclose(arrays[-1], 64.0)  # ones @ ones, K=64: the calls computed
    # The loop plans its calls from the caller's warm-up time: one said to take a
    # nanosecond plans ~10**7 calls for 10 ms, and the repeat runs until its cap, 4x that.
    start = time.perf_counter()
    mod.time(*arrays, number=1, repeat=1, min_repeat_ms=10, warm_s=1e-9)
    assert time.perf_counter() - start >= 0.04


def test_each_short_repeat_starts_after_a_sleep(monkeypatch, tmp_path: Path) -> None:
    """The short-repeat job sleeps before every repeat (threads that slept get a core on
    waking) and gives each repeat's cost and share of waiting for a core; it ends once
    enough repeats ran alone."""
    from workers import cpu

    job = _short_repeat_job(tmp_path, short_repeats=cpu.SHORT_REPEATS_MAX, short_seconds=60.0)
    slept: list[float] = []
    sleep = time.sleep
    monkeypatch.setattr(cpu.time, "sleep", lambda s: (slept.append(s), sleep(s)))
    value, outputs = cpu.time_kernel(lambda: None, job)
    assert outputs == [] and slept == [cpu.SHORT_REPEAT_GAP_S] * len(value["costs"])
    costs, waits = value["costs"], value["waits"]
    assert len(costs) == len(waits) and all(c > 0 for c in costs) and all(w >= 0 for w in waits)
    if len(costs) == cpu.SHORT_REPEATS_MAX:  # a machine this busy: no figure in 400 repeats
        assert len(cpu.unpreempted(costs, waits)) < cpu.MIN_UNPREEMPTED
    else:  # it stopped at the first repeat that made a figure, not later
        assert len(cpu.unpreempted(costs, waits)) == cpu.MIN_UNPREEMPTED
        assert len(cpu.unpreempted(costs[:-1], waits[:-1])) == cpu.MIN_UNPREEMPTED - 1


def test_short_repeats_end_at_their_count_or_their_time(tmp_path: Path) -> None:
    from workers import cpu

    job = _short_repeat_job(tmp_path, short_repeats=3, short_seconds=60.0)
    value, _ = cpu.time_kernel(lambda: None, job)
    assert len(value["costs"]) == 3
    value, _ = cpu.time_kernel(lambda: None, {**job, "short_repeats": 100, "short_seconds": 0})
    assert len(value["costs"]) == 1


def _loaded_kernel(tmp_path: Path):
    """The parallel matmul loaded in this process, with its inputs."""
    from schedule import KernelSignature, load_module
    from workers.reference import kernel_arrays

    job = _short_repeat_job(tmp_path)
    signature = KernelSignature.from_json(job["signature"])
    return (load_module(job["library"], signature),
            kernel_arrays(signature, job["workload"], job["seed"]))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="placement needs two cores")
def test_the_threads_are_spread_one_per_core_and_given_back_their_cores(
        tmp_path: Path) -> None:
    """The kernel's worker threads are those that ran during a call; the caller takes one
    core, its workers the others; a shift moves the caller on; release gives every thread
    the CPU set it had back."""
    import threading

    from workers.placement import Spread, helpers_of

    mod, arrays = _loaded_kernel(tmp_path)
    helpers = helpers_of(lambda: mod.time(*arrays, number=1, repeat=1, min_repeat_ms=10))
    assert helpers and threading.get_native_id() not in helpers
    time.sleep(0.3)  # the workers stop spinning and sleep
    idle = helpers_of(lambda: time.sleep(0.01))
    assert not set(idle) & set(helpers)  # the kernel's workers slept (the suite's may not)
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(helpers[0], {cores[-1]})  # a CPU set of its own, to be given back
    spread = Spread(helpers + [-1] * 8)  # more threads than cores: the first ones are placed
    assert spread.useful and spread.helpers == helpers[: len(cores) - 1]
    try:
        spread.place()
        assert os.sched_getaffinity(0) == {cores[0]}
        assert all(os.sched_getaffinity(t) == {cores[1]} for t in spread.helpers)
        spread.shift()
        assert os.sched_getaffinity(0) == {cores[1]}
        assert all(os.sched_getaffinity(t) == {cores[0]} for t in spread.helpers)
    finally:
        spread.release()
        given_back = os.sched_getaffinity(helpers[0])
        os.sched_setaffinity(helpers[0], set(cores))
    assert os.sched_getaffinity(0) == set(cores) and given_back == {cores[-1]}
    assert not Spread([]).useful  # a kernel with no workers: nothing to place


def test_the_short_repeats_leave_the_threads_on_all_their_cores(tmp_path: Path) -> None:
    from workers import cpu

    cores = os.sched_getaffinity(0)
    job = _short_repeat_job(tmp_path, short_repeats=10, short_seconds=60.0)
    value, _ = cpu.time_kernel(lambda: None, job)
    assert 1 <= len(value["costs"]) <= 10
    assert all(os.sched_getaffinity(t) == cores for t in thread_stats())


def test_a_repeat_ends_once_it_has_lasted_four_times_its_minimum() -> None:
    """A million calls asked for, 10 ms a repeat: the repeat ends after about 40 ms, not
    after the million calls (seconds), as a machine slowed after the warm-up would hold
    it."""
    import numpy as np

    from schedule import build, te

    A = te.placeholder((256, 256), name="A")
    B = te.compute((256, 256), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    mod = build(te.create_schedule(B), [A, B])
    a, b = np.ones((256, 256), "float32"), np.zeros((256, 256), "float32")
    start = time.perf_counter()
    (per_call,) = mod.time(a, b, number=10**6, repeat=1, min_repeat_ms=10)
    assert time.perf_counter() - start < 0.5 * 10**6 * per_call


def test_a_timing_is_as_disturbed_as_the_other_load_or_its_threads_waiting_for_cores() -> None:
    """Threads crammed onto one core beside other work wait for it while the load the
    machine reports stays low: the larger of the two is the timing's slowdown."""
    settings = MeasureSettings(repeat=2)
    assert CpuDevice._timing({"costs": [1.0, 1.1], "load": 0.1, "waited": 0.6},
                             settings) == ([1.0, 1.1], 0.6)
    assert CpuDevice._timing({"costs": [1.0, 1.1], "load": 0.4, "waited": None},
                             settings) == ([1.0, 1.1], 0.4)
    assert CpuDevice._timing({"costs": [1.0, 1.1]}, settings) == ([1.0, 1.1], None)
    assert CpuDevice._timing({"costs": [1.0]}, settings) == (None, None)  # not 2 repeats
