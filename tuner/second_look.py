"""Second looks: a program that would become its task's best is measured again before its
record counts.

A tuner ranks programs by one measurement each and keeps the fastest. On a shared machine
a program's speed drifts from one moment to the next, by tens of percent for memory-heavy
programs (the host's last-level cache and memory are shared with other tenants, which the
VM's own CPU accounting does not see: ``bench/host_drift.py`` measured one GEMM at 11.9 to
24 ms in processes seconds apart while numpy's stayed within 1.44x). So the fastest of
hundreds of single figures is mostly the one taken in the fastest moment: a GEMM tune kept
a program measured at 12.2 ms that re-times at 15 ms, and the best query returned it.

Here the batch's would-be leader is measured a second time right after its batch, and a
third time if the two looks disagree by more than the noise allows (``agree``). Its
record keeps the repeats of the look with the middle median (of two agreeing looks, the
repeats of both; of two that disagree with no third, the slower), and every look's
figures in ``measure["looks"]``: one outlying moment, fast or slow, no longer decides
which program leads. It costs one or two measurements per improvement of the best.
Simulated devices (deterministic cycle counts) get no second look.
"""

from __future__ import annotations

import dataclasses

from workers import MeasureResult

#: How far a quiet machine's timings of one program may differ between two measurements (a
#: 2-core VM measured 7-9% between runs minutes apart): the least disagreement that makes
#: two looks, or a re-measurement and its record, disagree.
QUIET_VARIATION = 0.10


def worth_a_look(result: MeasureResult) -> bool:
    """A figure that can be checked by measuring again: the program ran, nothing disturbed
    it, and the device times it (a simulator's cycle count is the same every time)."""
    return (result.ok and not result.disturbed and result.median_cost is not None
            and not result.provenance.settings.get("simulated"))


def tolerance(*noises: float) -> float:
    """How far two measurements of one program may differ and still agree: the noise either
    saw (a slowdown factor), at least ``QUIET_VARIATION``."""
    return max(QUIET_VARIATION, *(noise - 1.0 for noise in noises))


def agree(a: MeasureResult, b: MeasureResult) -> bool:
    """Two measurements of one program agree within ``tolerance``."""
    assert a.median_cost is not None and b.median_cost is not None
    return abs(b.median_cost / a.median_cost - 1.0) <= tolerance(a.noise, b.noise)


def settle(looks: list[MeasureResult]) -> MeasureResult:
    """The result a program's record keeps from its looks (the first one's provenance and
    time, the run seconds of all): see the module docstring for which repeats."""
    first = looks[0]
    if len(looks) == 1:
        return first
    if len(looks) == 2 and agree(*looks):
        costs = [*looks[0].costs, *looks[1].costs]
    else:
        by_median = sorted(looks, key=lambda r: r.median_cost or 0.0)
        costs = list(by_median[len(by_median) // 2].costs)
    return dataclasses.replace(first, costs=costs, run_s=sum(r.run_s for r in looks),
                               noise=max(r.noise for r in looks))
