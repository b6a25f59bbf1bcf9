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
