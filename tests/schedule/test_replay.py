"""Steps are plain JSON and replay to the same program, in this process or a fresh one."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schedule import ScheduleError, build, lower, te
from schedule.examples import matmul_schedule

from .helpers import check, matmul

ROOT = Path(__file__).resolve().parents[2]


def test_steps_are_json_and_replay_to_the_same_program():
    s, args = matmul_schedule(70, 50, 30, rows=6, cols=16, k_block=8)
    steps = json.loads(json.dumps(s.steps))
    assert steps == s.steps
    A, B, C = matmul(70, 50, 30)
    s2 = te.create_schedule(C).replay(steps)
    assert s2.steps == steps
    assert str(lower(s2, [A, B, C])) == str(lower(s, args))
    assert build(s2, [A, B, C]).source == build(s, args).source
    check(s2, [A, B, C], lambda a, b: a @ b)


def test_replay_in_a_fresh_process_gives_identical_source(tmp_path):
    s, args = matmul_schedule(40, 36, 20, rows=4, cols=16)
    s[s.stages[-1]].pragma(s.stages[-1].leaf_iter_vars[0], "auto_unroll_max_step", 16)
    steps_file = tmp_path / "steps.json"
    steps_file.write_text(json.dumps(s.steps))
    program = (
        "import json, sys\n"
        "from schedule import build, te\n"
        "from tests.schedule.helpers import matmul\n"
        "A, B, C = matmul(40, 36, 20)\n"
        "steps = json.load(open(sys.argv[1]))\n"
        "s = te.create_schedule(C).replay(steps)\n"
        "sys.stdout.write(build(s, [A, B, C]).source)\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", program, str(steps_file)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout == build(s, args).source


@pytest.mark.parametrize("step, message", [
    (["split", "C", "i"], "split takes 3 arguments"),
    (["explode", "C"], "unknown step 'explode'"),
    (["split", "Nope", "i", 2], "no stage named 'Nope'"),
    (["split", "C", "zz", 2], "no axis named 'zz'"),
    (["split", "C", "i", "two"], "positive integer"),
    (["reorder", "C", "i"], "needs a list of axis names"),
    ("split C i 2", "must be a list"),
    (["vectorize", "C", "k"], "reduction axis"),
])
def test_malformed_or_invalid_steps_give_clear_errors(step, message):
    A, B, C = matmul(8, 8, 8)
    with pytest.raises(ScheduleError, match=message):
        te.create_schedule(C).replay([step])


def test_replay_error_names_the_step_index():
    A, B, C = matmul(8, 8, 8)
    with pytest.raises(ScheduleError, match=r"step 1 \['split', 'C', 'i', 2\].*already split"):
        te.create_schedule(C).replay([["split", "C", "i", 2], ["split", "C", "i", 2]])


def test_workload_key_is_structural_and_stable():
    from schedule import canonical_text, workload_key

    def mm(axis_name: str, fcompute):
        A = te.placeholder((8, 4), name="A")
        B = te.placeholder((4, 6), name="B")
        k = te.reduce_axis((0, 4), name=axis_name)
        return te.compute((8, 6), fcompute(A, B, k), name="C")

    first = mm("k", lambda A, B, k: lambda i, j: te.sum(A[i, k] * B[k, j], axis=k))
    second = mm("z", lambda A, B, k: lambda x, y: te.sum(A[x, k] * B[k, y], axis=k))
    assert workload_key(first) == workload_key(second)
    assert "sum" in canonical_text(first)
    A, B, C = matmul(8, 6, 4)
    A2, B2, C2 = matmul(8, 6, 5)
    assert workload_key(C) != workload_key(C2)
    program = ("from tests.schedule.helpers import matmul\nfrom schedule import workload_key\n"
               "print(workload_key(matmul(8, 6, 4)[2]))")
    out = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "7"})
    assert out.stdout.strip() == workload_key(C)
