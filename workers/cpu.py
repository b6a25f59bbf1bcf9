"""The ``cpu`` device: builds with the schedule layer's C code generator and times a built
kernel in a child process with the timing loop inside the native code.

One device per machine (Ray resource ``cpu-measure``). A run loads the library in the
device's sandbox process, makes the workload's deterministic inputs, signals that it has
started, optionally runs the kernel once for the correctness check, then calls the
kernel's ``<entry>_time`` function (TVM's time evaluator: warm-up call, ``repeat`` timings
of ``number`` calls lasting at least ``min_repeat_ms``, optional cache flush).

Other work on the machine is watched (``workers.interference``): a disturbed timing is
taken again, and where the machine stays busy, as short repeats of which those that ran
alone on the cores make the figure.

The reference outputs are computed in a sandbox of their own (``workers.reference``); the
runner process only compares bytes. A workload whose reference fails gets results marked
``workload_error`` (the tuner rejects it).
"""

from __future__ import annotations

import functools
import os
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from schedule import (
    BuildError,
    CompileTimeout,
    KernelSignature,
    ScheduleError,
    Target,
    TensorExprError,
    Workload,
    compile_schedule,
    compile_source,
    host_cpu_target,
    load_module,
    make_schedule,
)

from .baselines import BASELINES, peak_source
from .device import BuildResult, Device, register_device
from .interference import Window, noise, waiting_share
from .measure import ErrorKind, MeasureInput, MeasureResult, MeasureSettings, Provenance
from .placement import Spread, helpers_of
from .reference import (
    REFERENCE_JOB,
    ReferenceOutputs,
    compare_outputs,
    kernel_arrays,
    output_bytes,
)
from .sandbox import Sandbox, SandboxError

# ISAs a host can run, by the host's own ISA (weakest first).
_X86_ISAS = ("generic", "sse4", "avx2", "avx512")
_RUNNABLE = {**{isa: _X86_ISAS[: i + 1] for i, isa in enumerate(_X86_ISAS)},
             "neon": ("generic", "neon")}
#: GFLOP/s of each repeat of the peak measurement, by target (this process's machine).
_PEAK_RATES: dict[str, list[float]] = {}


@functools.lru_cache(maxsize=4)
def compiler_version(cc: str) -> str:
    """First line of ``cc --version`` (e.g. ``gcc (Debian 12.2.0-14) 12.2.0``)."""
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return cc
    return out.stdout.splitlines()[0].strip() if out.stdout else cc


#: Timing on a machine that stays busy: short repeats (each the calls that last
#: ``SHORT_REPEAT_MS``), of which those during which the kernel's threads waited for a
#: core at most ``MAX_WAIT`` of the repeat's time ran alone; once there are
#: ``MIN_UNPREEMPTED``, all of them make the figure (``short_figure``). All of them, not
#: only those near the fastest: the fastest of a hundred repeats is far out in the tail,
#: and the median of those within 10% of it read up to 4% under a quiet re-time of the
#: same program (bench/RESULTS.md, session 42).
#: The repeats go on until there are, for at most ``SHORT_REPEATS_MAX`` repeats or
#: ``SHORT_REPEAT_BUDGET_S`` seconds (half the run timeout where that is less); a
#: candidate's tries add up. Beside a busy loop on one of two cores, 2-30% of the repeats
#: of a 1.3 ms conv ran alone, by the minute; a fixed 40 a try left most candidates of a
#: tune without a figure (58 of 64). Each repeat starts after a sleep of
#: ``SHORT_REPEAT_GAP_S``: threads that slept are handed a core on waking more often (a
#: 1.1 ms conv: 10-20 of 40 instead of 4-7). Its warm-up call is made before the window
#: in which the threads' waiting is counted, which then holds only the timed calls: of the
#: repeats of a 1.2 ms conv beside a busy loop, 118 of 150 ran alone instead of 46; of a
#: 3 ms one, 10 instead of 0 (the busy loop takes its core back after a few ms).
SHORT_REPEATS_MAX, SHORT_REPEAT_BUDGET_S = 400, 3.0
SHORT_REPEAT_MS, MAX_WAIT, MIN_UNPREEMPTED = 1, 0.01, 12
SHORT_REPEAT_GAP_S = 0.003
#: A try of short repeats is worth making when this many fit in its budget.
SHORT_REPEATS_WORTH = 20


def unpreempted(costs: list[float], waits: list[float]) -> list[float]:
    """The costs of the repeats that ran alone (their threads waited at most ``MAX_WAIT``
    of the time for a core); a figure once ``MIN_UNPREEMPTED`` or more."""
    return [c for c, w in zip(costs, waits, strict=True) if w <= MAX_WAIT]


def short_figure(alone: list[float]) -> list[float]:
    """The repeats of a figure made of single short repeats that ran alone: the mean of each
    interleaved third of them, as each of the standard timing's repeats is the mean of
    the calls it made (their median is the figure; a median of the single calls read 1-4%
    under the standard timing, which counts a call slowed by an interrupt as it is)."""
    return [statistics.fmean(alone[i::3]) for i in range(min(3, len(alone)))]


def time_kernel(started: Callable[[], None], job: dict[str, Any]) -> tuple[Any, list[bytes]]:
    """Sandbox job: load a kernel, time it, and say how much CPU other work used meanwhile
    and what share of the time the kernel's threads waited for a core
    (``interference``); with ``check`` also return its outputs. With ``short_repeats``,
    time short repeats instead, until enough ran alone (``unpreempted``), that many were
    made or ``short_seconds`` passed, and give each one's share of waiting."""
    signature = KernelSignature.from_json(job["signature"])
    mod = load_module(job["library"], signature)
    arrays = kernel_arrays(signature, job["workload"], job["seed"])
    started()
    outputs: list[bytes] = []
    if job["check"]:
        mod(*arrays)
        outputs = output_bytes(arrays, signature)
    window = Window.start()
    if job.get("short_repeats"):
        return time_short_repeats(mod, arrays, job, window), outputs
    costs, share = waiting_share(lambda: mod.time(
        *arrays, number=job["number"], repeat=job["repeat"],
        min_repeat_ms=job["min_repeat_ms"], flush_bytes=job["flush_bytes"]))
    return {"costs": costs, "load": window.other_load(), "waited": share}, outputs


def time_short_repeats(mod: Any, arrays: list[np.ndarray], job: dict[str, Any],
                   window: Window) -> dict[str, Any]:
    """Time short repeats (``time_kernel``), the threads spread one per core
    (``workers.placement``), until enough ran alone, ``short_repeats`` were made or
    ``short_seconds`` passed."""
    costs: list[float] = []
    waits: list[float] = []
    spread = Spread(helpers_of(lambda: mod.time(*arrays, number=1, repeat=1,
                                                min_repeat_ms=10)))
    deadline = time.perf_counter() + float(job["short_seconds"])
    try:
        spread.place()
        while len(costs) < job["short_repeats"]:
            time.sleep(SHORT_REPEAT_GAP_S)
            warm = time.perf_counter()
            mod(*arrays)  # the warm-up, outside the window watched for waiting
            cost, share = waiting_share(functools.partial(
                mod.time, *arrays, number=1, repeat=1, min_repeat_ms=SHORT_REPEAT_MS,
                flush_bytes=job["flush_bytes"], warm_s=time.perf_counter() - warm))
            costs += cost
            if share is None:
                return {"costs": costs, "waits": None, "stolen": None}
            waits.append(share)
            if len(unpreempted(costs, waits)) >= MIN_UNPREEMPTED \
                    or time.perf_counter() >= deadline:
                break
            if share > MAX_WAIT:
                spread.shift()
    finally:
        spread.release()
    return {"costs": costs, "waits": waits, "stolen": window.stolen_load()}


@register_device
class CpuDevice(Device):
    """The host CPU as a measurement device."""

    kind = "cpu"
    resource = "cpu-measure"
    baselines = BASELINES
    #: The sandbox job that computes a workload's reference outputs.
    reference_job: ClassVar[str] = REFERENCE_JOB

    def __init__(self, node: str = ""):
        super().__init__(node)
        self.host = socket.gethostname()
        self.target = host_cpu_target()
        self._sandbox = Sandbox()
        self._baseline_sandbox = Sandbox()  # ended before the next kernel is timed
        self._references = ReferenceOutputs(self.reference_job)

    @classmethod
    def count_here(cls) -> int:
        return 1

    @classmethod
    def compile_candidate(cls, inp: MeasureInput,
                          compile_timeout: float) -> tuple[bytes, dict[str, Any], list[str]]:
        """Replay the steps, lower, generate C and compile: the library bytes, the kernel
        signature (JSON) and the target's compiler flags. Raises the schedule layer's
        ``ScheduleError`` / ``TensorExprError`` (invalid schedule), ``CompileTimeout`` or
        ``BuildError``."""
        if inp.library == "peak":
            library, _ = compile_source(peak_source(inp.target), inp.target.compiler_flags(),
                                        compile_timeout)
            return library.read_bytes(), {"baseline": "peak"}, list(inp.target.compiler_flags())
        if inp.library:  # a library's own code: nothing to build
            return b"", {"baseline": inp.library}, []
        s, args = make_schedule(inp.workload, inp.steps)
        artifact = compile_schedule(s, args, inp.target, timeout=compile_timeout)
        return artifact.library.read_bytes(), artifact.signature.to_json(), list(artifact.flags)

    @classmethod
    def build(cls, inp: MeasureInput, compile_timeout: float) -> BuildResult:
        start = time.perf_counter()
        compiler = compiler_version(os.environ.get("CC", "gcc"))
        flags = list(inp.target.compiler_flags())
        try:
            library, signature, flags = cls.compile_candidate(inp, compile_timeout)
        except (ScheduleError, TensorExprError) as err:
            kind, message = ErrorKind.INVALID_SCHEDULE, str(err)
        except CompileTimeout as err:
            kind, message = ErrorKind.COMPILE_TIMEOUT, str(err)
        except BuildError as err:
            kind, message = ErrorKind.COMPILE_ERROR, str(err)
        else:
            return BuildResult(ErrorKind.NONE, "", time.perf_counter() - start, library,
                               signature, compiler, flags)
        return BuildResult(kind, message, time.perf_counter() - start, compiler=compiler,
                           flags=flags)

    @property
    def id(self) -> str:
        return f"cpu@{self.host}" + (f"/{self.node[:12]}" if self.node else "")

    def serves(self, target: Target) -> bool:
        """A cpu target of an ISA this host runs, asking for no more cores than it has."""
        return (target.kind == "cpu" and target.isa in _RUNNABLE.get(self.target.isa, ())
                and target.cores <= self.target.cores)

    def is_alive(self) -> bool:
        try:
            return self._sandbox.call("workers.sandbox:ping", {}, start_timeout=30.0,
                                      timeout=30.0).status == "ok"
        except SandboxError:
            return False

    def _reference(self, workload: Workload, settings: MeasureSettings
                   ) -> list[np.ndarray] | tuple[str, bool]:
        return self._references.get(workload, settings)

    @staticmethod
    def _library_file(library: bytes) -> Path:
        """Write the library to a fresh file for the child to load (removed after its run)."""
        with tempfile.NamedTemporaryFile(prefix="tt-kernel-", suffix=".so",
                                         delete=False) as file:
            file.write(library)
        return Path(file.name)

    def run(self, build: BuildResult, inp: MeasureInput,
            settings: MeasureSettings) -> MeasureResult:
        start = time.perf_counter()
        provenance = Provenance(self.host, self.node, self.target.model_name, str(inp.target),
                                build.compiler, list(build.flags), settings.timing())

        def result(kind: ErrorKind, message: str = "", costs: Any = ()) -> MeasureResult:
            return MeasureResult(list(costs), kind, message, build.build_s,
                                 time.perf_counter() - start, self.id, time.time(), provenance)

        if inp.library:
            return self._run_baseline(build, inp, settings, result)
        self._baseline_sandbox.close()  # no library runtime stays beside the timing
        reference = None
        if settings.check:
            try:
                reference = self._reference(inp.workload, settings)
            except SandboxError as err:
                return result(ErrorKind.DEVICE_LOST, f"{self.id}: {err}")
            if isinstance(reference, tuple):  # the workload's fault: no candidate can pass
                message, permanent = reference
                return replace(result(ErrorKind.RUNTIME_ERROR, message),
                               workload_error=permanent)
        library = self._library_file(build.library)
        job = {"library": str(library), "signature": build.signature,
               "workload": inp.workload.to_json(), "seed": settings.seed,
               "check": settings.check,
               "number": settings.number, "repeat": settings.repeat,
               "min_repeat_ms": settings.min_repeat_ms, "flush_bytes": settings.flush_bytes}
        try:
            quietest: tuple[float, list[float]] | None = None
            unpreempted_count, short = 0, False
            short_costs: list[float] = []
            short_waits: list[float] = []
            for _ in range(1 + settings.remeasure):
                if short:  # the machine stays busy: its short repeats that ran alone
                    answer = self._short_repeats(job, settings)
                    if answer is not None:
                        short_costs += answer[0]
                        short_waits += answer[1]
                    clean = unpreempted(short_costs, short_waits)
                    if len(clean) >= MIN_UNPREEMPTED:
                        figure = short_figure(clean)
                        spread = noise(figure, None)
                        if spread <= settings.noise_tolerance:
                            quietest, unpreempted_count = (spread, figure), len(clean)
                            break
                    continue
                outcome = self._sandbox.call("workers.cpu:time_kernel", job,
                                             start_timeout=settings.load_timeout,
                                             timeout=settings.run_timeout)
                if outcome.status != "ok":
                    break
                costs, load = self._timing(outcome.value, settings)
                if costs is None:
                    self._sandbox.restart()
                    return result(ErrorKind.RUNTIME_ERROR, "the kernel's timing gave no "
                                  f"valid costs: {str(outcome.value)[:200]}")
                if job["check"]:
                    mismatch = compare_outputs(outcome.blobs, reference) \
                        if reference is not None else ""
                    if mismatch:
                        self._sandbox.restart()  # it may have written where it should not
                        return result(ErrorKind.WRONG_ANSWER, mismatch, costs)
                    job = {**job, "check": False}
                slowdown = noise(costs, load)
                if quietest is None or slowdown < quietest[0]:
                    quietest = (slowdown, costs)
                if slowdown <= settings.noise_tolerance:
                    break
                short = self._short_repeats_fit(costs, inp, settings)
        except SandboxError as err:
            return result(ErrorKind.DEVICE_LOST, f"{self.id}: {err}")
        finally:
            library.unlink(missing_ok=True)
        if outcome.status != "ok":
            self._sandbox.restart()
        if quietest is not None:  # (a re-measurement that failed leaves the first figure)
            slowdown, costs = quietest
            return replace(result(ErrorKind.NONE, costs=costs), noise=round(slowdown, 3),
                           disturbed=slowdown > settings.noise_tolerance,
                           unpreempted=unpreempted_count)
        if outcome.status == "start_timeout":
            return result(ErrorKind.RUN_TIMEOUT, f"loading the kernel {outcome.message}")
        if outcome.status == "timeout":
            return result(ErrorKind.RUN_TIMEOUT, f"the kernel {outcome.message}")
        if outcome.status == "raised":
            return result(ErrorKind.RUNTIME_ERROR, outcome.message)
        return result(ErrorKind.RUNTIME_ERROR, f"the kernel crashed: {outcome.message}")

    def _run_baseline(self, build: BuildResult, inp: MeasureInput, settings: MeasureSettings,
                      result: Callable[..., MeasureResult]) -> MeasureResult:
        """Time a baseline (``workers.baselines``) in a sandbox of the baselines, ended
        before the next kernel is timed. The peak is measured once per target in this
        process (a property of the machine), then reused."""
        flops = inp.workload.flops
        if inp.library == "peak":
            rates = _PEAK_RATES.get(str(inp.target))
            if rates:
                return result(ErrorKind.NONE, costs=[flops / (r * 1e9) for r in rates])
        job = {"workload": inp.workload.to_json(), "seed": settings.seed, "library": inp.library,
               "cores": inp.target.cores, "check": settings.check and inp.library != "numpy",
               "number": settings.number, "repeat": settings.repeat,
               "min_repeat_ms": settings.min_repeat_ms}
        library = self._library_file(build.library) if inp.library == "peak" else None
        try:
            if library is not None:
                job["path"] = str(library)
            outcome = self._baseline_sandbox.call(
                "workers.baselines:time_peak" if library is not None
                else "workers.baselines:time_library", job,
                start_timeout=settings.load_timeout,
                timeout=settings.run_timeout * (1 + settings.repeat))
        except SandboxError as err:
            return result(ErrorKind.DEVICE_LOST, f"{self.id}: {err}")
        finally:
            if library is not None:
                library.unlink(missing_ok=True)
        if outcome.status != "ok":
            kind = ErrorKind.RUN_TIMEOUT if "timeout" in outcome.status \
                else ErrorKind.RUNTIME_ERROR
            return result(kind, f"the {inp.library} baseline {outcome.message}")
        value = outcome.value if isinstance(outcome.value, dict) else {}
        if "unavailable" in value:
            return result(ErrorKind.RUNTIME_ERROR, str(value["unavailable"])[:500])
        if library is not None:  # the peak: the time of the workload's FLOPs at that rate
            rates = [r for r in value.get("gflops", []) if isinstance(r, float) and r > 0]
            if not rates or not flops:
                return result(ErrorKind.RUNTIME_ERROR, "the peak measurement gave no rate")
            _PEAK_RATES[str(inp.target)] = rates
            return result(ErrorKind.NONE, costs=[flops / (rate * 1e9) for rate in rates])
        costs, _ = self._timing({**value, "load": 0.0}, settings)
        if costs is None:
            return result(ErrorKind.RUNTIME_ERROR, f"the {inp.library} baseline's timing gave "
                                                   f"no valid costs: {str(value)[:200]}")
        if outcome.blobs:
            try:
                reference = self._reference(inp.workload, settings)
            except SandboxError as err:
                return result(ErrorKind.DEVICE_LOST, f"{self.id}: {err}")
            if isinstance(reference, tuple):
                return result(ErrorKind.RUNTIME_ERROR, reference[0])
            mismatch = compare_outputs(outcome.blobs, reference)
            if mismatch:
                return result(ErrorKind.WRONG_ANSWER, mismatch, costs)
        return result(ErrorKind.NONE, costs=costs)

    @staticmethod
    def _timing(value: Any, settings: MeasureSettings) -> tuple[list[float] | None, float | None]:
        """The costs a timing job answered (None if malformed) and the slowdown other work
        may have caused: the cores' worth of CPU it used, or the share of the time the
        kernel's threads waited for a core, whichever is more (None if unknown)."""
        if not isinstance(value, dict):
            return None, None
        costs = value.get("costs")
        if not (isinstance(costs, list) and len(costs) == settings.repeat and all(
                isinstance(c, float) and 0 <= c < float("inf") for c in costs)):
            return None, None
        known = [x for x in (value.get("load"), value.get("waited"))
                 if isinstance(x, float) and 0 <= x < float("inf")]
        return costs, max(known, default=None)

    @staticmethod
    def _short_budget(settings: MeasureSettings) -> float:
        """Seconds one try of short repeats may take."""
        return min(SHORT_REPEAT_BUDGET_S, settings.run_timeout / 2)

    def _short_repeats_fit(self, costs: list[float], inp: MeasureInput,
                           settings: MeasureSettings) -> bool:
        """Whether short repeats can tell a quiet figure on a busy machine: the kernel runs
        a parallel loop on every core of the machine (so while none of its threads lost its
        core, nothing else ran), and ``SHORT_REPEATS_WORTH`` repeats (each a sleep, a
        warm-up call and a timed one) fit in a try's budget."""
        per_repeat = SHORT_REPEAT_GAP_S + 2 * max(min(costs), SHORT_REPEAT_MS / 1e3)
        return (inp.target.cores >= self.target.cores
                and any(step[0] == "parallel" for step in inp.steps)
                and SHORT_REPEATS_WORTH * per_repeat <= self._short_budget(settings))

    def _short_repeats(self, job: dict[str, Any], settings: MeasureSettings
                       ) -> tuple[list[float], list[float]] | None:
        """One try of short repeats: their costs and shares of waiting, or None."""
        outcome = self._sandbox.call("workers.cpu:time_kernel",
                                     {**job, "short_repeats": SHORT_REPEATS_MAX,
                                      "short_seconds": self._short_budget(settings)},
                                     start_timeout=settings.load_timeout,
                                     timeout=settings.run_timeout)
        return self._short_answer(outcome.value) if outcome.status == "ok" else None

    @staticmethod
    def _short_answer(value: Any) -> tuple[list[float], list[float]] | None:
        """The costs and waits of a short-repeat answer (``time_kernel`` with
        ``short_repeats``); None if it is malformed, if Linux did not say how long the
        threads waited, or if the hypervisor stole time meanwhile."""
        if not isinstance(value, dict):
            return None
        costs, waits, stolen = value.get("costs"), value.get("waits"), value.get("stolen")
        if not (isinstance(costs, list) and isinstance(waits, list)
                and 1 <= len(costs) == len(waits) <= SHORT_REPEATS_MAX
                and all(isinstance(c, float) and 0 < c < float("inf") for c in costs)
                and all(isinstance(w, float) for w in waits)):
            return None
        if not (isinstance(stolen, float) and stolen == 0.0):
            return None
        return costs, waits

    def close(self) -> None:
        self._sandbox.close()
        self._references.close()
        self._baseline_sandbox.close()
