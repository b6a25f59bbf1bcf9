"""The dashboard in headless Chromium (Debian's ``chromium``, installed by .ci/run): the
page lists the jobs and draws the selected job's best-so-far curve; a screenshot shows the
curve's pixels in the chart area."""

from __future__ import annotations

import html
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from .browser import Page
from .conftest import TINY_JOB, Server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)")
CURVE_RGB = (0x1F, 0x77, 0xB4)  # CURVE_COLOR in api/static/dashboard.js
BASELINE_RGB = {"numpy": (0x17, 0xBE, 0xCF), "peak": (0x2A, 0x7D, 0x2A)}  # BASELINE_COLORS
WIDTH, HEIGHT = 1400, 900
JOBS_PANEL_WIDTH = 480  # the job list is at the left; the charts are right of it


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
               f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=6000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _page(server: Server, job_id: str) -> str:
    return f"{server.url}/?job={job_id}#token={server.tokens['reader']}"


def test_dashboard_lists_jobs_and_draws_the_curve(server: Server, finished_job: dict,
                                                  tmp_path: Path) -> None:
    job_id = finished_job["created"]["id"]
    dom = chromium(tmp_path / "profile-dom", "--dump-dom", _page(server, job_id)).stdout
    assert 'data-ready="1"' in dom and 'data-job-status="succeeded"' in dom
    assert job_id[:8] in dom  # the job list
    [points] = re.findall(r'<polyline points="([^"]+)"[^>]*class="curve"', dom)
    assert len(points.split()) >= 3  # a step curve through the batches and reconfirmation


def test_every_trial_is_a_point_and_the_remeasured_best_a_diamond(
        server: Server, finished_job: dict, tmp_path: Path) -> None:
    job_id = finished_job["created"]["id"]
    with server.client("reader") as api:
        [task] = api.trials(job_id)["tasks"]
    dom = chromium(tmp_path / "profile-trials", "--dump-dom", _page(server, job_id)).stdout
    assert "matmul M=32 N=32 K=32" in dom  # the readable title, not Workload.op(...)
    measured = [t for t in task["trials"] if not t["reconfirm"] and t["latency_s"]]
    assert len(re.findall(r'class="trial"', dom)) == len(measured) > 0
    assert len(re.findall(r'class="reconfirm"', dom)) == 1
    assert "data-live" not in dom  # a finished job is not followed
    # the job: its spec, where its time went, and a row per task
    assert "8 trials in batches of 4 · cost model random" in dom
    assert re.search(r'class="time-split">time [0-9.]+ s: search [0-9.]+ s, measure', dom)
    [row] = re.findall(r"<tr data-task-key=\"[0-9a-f]+\">(.*?)</tr>", dom)
    assert re.findall(r"<td>(.*?)</td>", row)[:4] == ["matmul M=32 N=32 K=32", "1", "8",
                                                      "done"]
    assert re.search(r'<td title="last round: [^"]+">[0-9.e+-]+ ms</td>', row)  # the scheduler
    # the baselines the job measured on its device: lines on the chart, ratios in the row
    [task_view] = finished_job["job"]["tasks"]
    numpy = task_view["baselines"]["numpy"]["latency_s"]
    peak = task_view["baselines"]["peak"]["latency_s"]
    assert numpy > peak > 0
    assert re.findall(r'<g class="baseline" data-baseline="([a-z]+)">', dom) == ["numpy", "peak"]
    [versus] = re.findall(r'<td class="versus">(.*?)</td>', row)
    ratio, percent = re.fullmatch(r"([0-9.]+)x numpy · ([0-9]+)% of peak", versus).groups()
    best = task_view["best_latency_s"]
    assert float(ratio) == pytest.approx(numpy / best, abs=0.006)
    assert int(percent) == round(100 * peak / best)


def test_the_best_program_shows_its_steps_and_the_command_that_reproduces_it(
        server: Server, finished_job: dict, tmp_path: Path) -> None:
    job = finished_job["job"]
    [task] = job["tasks"]
    with server.client("reader") as api:
        [best] = api.best(task["workload_key"], job["target"])["results"]
    page = (f"{server.url}/?job={job['id']}&best={task['workload_key']}"
            f"#token={server.tokens['reader']}")
    dom = chromium(tmp_path / "profile-best", "--dump-dom", page).stdout
    [steps] = re.findall(r'<pre class="steps">(.*?)</pre>', dom, re.S)
    lines = steps.splitlines()
    assert len(lines) == len(best["steps"])
    assert lines[0] == " ".join(str(part) for part in best["steps"][0])  # e.g. split T i 16
    [command] = re.findall(r'<code class="command">(.*?)</code>', dom)
    assert command == ("tensortune best --op matmul -p K=32 -p M=32 -p N=32 -p dtype=float32 "
                       "-p requant_shift=-1 "
                       f"-p transpose_a=false -p transpose_b=false --target '{job['target']}' "
                       "--source")
    assert f"{best['latency_s'] * 1e3:.4g}"[:4] in dom
    # its loop IR and generated source, lowered by the server in a sandbox
    with server.client("reader") as api:
        program = api.best_program(task["workload_key"], job["target"])
    assert program["steps"] == best["steps"] and program["loop_ir"].startswith("func main(")
    for name, label in (("loop-ir", "loop IR"), ("source", "generated source")):
        [text] = re.findall(rf'<details class="{name}"><summary>{label}</summary><pre>(.*?)</pre>',
                            dom, re.S)
        assert html.unescape(text) == program[name.replace("-", "_")]
    # the command does what it says: the same program, from the server's database
    argv = [sys.executable, "-m", "tuner", *shlex.split(command)[1:], "--db", server.db_url,
            "--json"]
    printed = json.loads(subprocess.run(argv, capture_output=True, text=True,
                                        check=True).stdout)
    assert printed["steps"] == best["steps"] and "source" in printed


def test_two_jobs_on_one_workload_share_a_chart(server: Server, finished_job: dict,
                                                 failing_job: dict, tmp_path: Path) -> None:
    this, other = failing_job["created"]["id"], finished_job["created"]["id"]
    page = f"{server.url}/?job={this}&compare={other}#token={server.tokens['reader']}"
    dom = chromium(tmp_path / "profile-compare", "--dump-dom", page).stdout
    [points] = re.findall(r'<polyline points="([^"]+)"[^>]*class="curve-compare"', dom)
    assert len(points.split()) >= 2  # the other job's best-so-far, over this job's crosses
    assert f"╍ job {other[:8]} (random cost model, sketch policy, cpu " in dom
    assert f'<option value="{other}" selected="">' in dom  # the header shows the choice


def test_a_running_job_is_followed_and_shows_the_trials_measured_so_far(
        server: Server, tmp_path: Path) -> None:
    spec = {**TINY_JOB, "trials": 400, "batch_size": 4,
            "workloads": [{"op": "matmul", "params": {"M": 48, "N": 48, "K": 48}}]}
    with server.client("submitter") as api:
        job_id = api.submit(spec)["id"]
        try:
            seen = []
            for n in range(2):
                while api.job(job_id)["trials"] < 4 * (1 + 2 * n):  # a batch, then two more
                    time.sleep(0.1)
                dom = chromium(tmp_path / f"profile-live{n}", "--dump-dom",
                               _page(server, job_id)).stdout
                assert 'data-live="stream"' in dom and 'data-job-status="running"' in dom
                seen.append(len(re.findall(r'class="(?:trial|trial-error)"', dom)))
            assert seen[1] > seen[0] >= 4  # later batches appear
        finally:
            api.cancel(job_id)


def test_failed_candidates_are_marked_by_error_kind(server: Server, failing_job: dict,
                                                   tmp_path: Path) -> None:
    [task] = failing_job["trials"]["tasks"]
    trials = [t for t in task["trials"] if not t["reconfirm"]]  # (a best of another job
    kinds = {t["error_kind"] for t in trials}                   # may be re-measured too)
    assert len(trials) == 8 and "none" not in kinds
    dom = chromium(tmp_path / "profile-errors", "--dump-dom",
                   _page(server, failing_job["created"]["id"])).stdout
    marks = re.findall(r'class="trial-error" data-error-kind="([a-z_]+)"', dom)
    failed = [t for t in task["trials"] if t["error_kind"] != "none"]  # re-measures too
    assert len(marks) == len(failed) >= 8 and set(marks) == kinds
    assert "no valid measurement yet" in dom
    [kind] = kinds
    assert f"✕ {kind} {len(failed)}" in dom  # the legend counts them
    example = next(t["error"] for t in trials if t["error_kind"] == kind)
    assert f'<li data-error-kind="{kind}"><strong>{kind}: </strong><span>{example}' in dom


def test_screenshot_shows_the_curve_in_the_chart(server: Server, finished_job: dict,
                                                 tmp_path: Path) -> None:
    shot = tmp_path / "dashboard.png"
    done = chromium(tmp_path / "profile-shot", f"--screenshot={shot}",
                    _page(server, finished_job["created"]["id"]))
    assert shot.exists(), done.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (WIDTH, HEIGHT)
    rgb_pixels = np.asarray(image, dtype=np.int16)  # (height, width, 3)

    def pixels(rgb: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
        """The x and y of the pixels within 12 of ``rgb`` in each channel."""
        ys, xs = np.nonzero((np.abs(rgb_pixels - np.array(rgb)) <= 12).all(axis=2))
        return xs, ys

    xs, _ = pixels(CURVE_RGB)
    assert xs.size > 300, "no curve drawn"
    assert (xs > JOBS_PANEL_WIDTH).all()
    assert xs.max() - xs.min() > 200  # it spans the chart, not a dot
    for name, rgb in BASELINE_RGB.items():  # a dotted line across the chart, one row
        xs, ys = pixels(rgb)
        rows = Counter(ys[xs > JOBS_PANEL_WIDTH].tolist())
        row, count = rows.most_common(1)[0] if rows else (0, 0)
        assert count > 100, f"no {name} baseline drawn"
        on_row = xs[ys == row]
        assert on_row.max() - on_row.min() > 400


def test_a_model_job_shows_the_models_estimate_first(server: Server, finished_model_job: dict,
                                                      tmp_path: Path) -> None:
    job = finished_model_job["job"]
    dom = chromium(tmp_path / "profile-model", "--dump-dom", _page(server, job["id"])).stdout
    assert 'data-ready="1"' in dom
    keys = re.findall(r'data-workload-key="([^"]+)"', dom)
    assert keys == ["model"] + [t["workload_key"] for t in job["tasks"]]
    assert f"model cnn.onnx: estimated latency ({len(job['tasks'])} tasks" in dom
    model_chart = dom[dom.index('data-workload-key="model"'):]
    [points] = re.findall(r'<polyline points="([^"]+)"', model_chart)[:1]
    assert len(points.split()) >= len(job["estimate_curve"])
    # the task table: each task's share of the model's FLOPs and of its estimated latency
    shares = [float(v) for v in re.findall(r'<td class="flops-share">([0-9.]+)%</td>', dom)]
    assert len(shares) == len(job["tasks"]) and sum(shares) == pytest.approx(100, abs=0.5)
    total = sum(t["flops"] * t["weight"] for t in job["tasks"])
    assert shares == [pytest.approx(100 * t["flops"] * t["weight"] / total, abs=0.06)
                      for t in job["tasks"]]
    estimate = job["estimated_latency_s"]
    parts = re.findall(r'<td class="estimate-share">[0-9.e+-]+ ms \(([0-9.]+)%\)</td>', dom)
    assert [float(p) for p in parts] == [
        pytest.approx(100 * t["weight"] * t["best_latency_s"] / estimate, abs=0.06)
        for t in job["tasks"]]


def test_an_open_page_redraws_from_the_event_stream_as_batches_arrive(
        server: Server, tmp_path: Path) -> None:
    spec = {**TINY_JOB, "trials": 400, "batch_size": 4,
            "workloads": [{"op": "matmul", "params": {"M": 40, "N": 40, "K": 40}}]}
    state = ("JSON.stringify({live: document.body.dataset.live || '', marker: !!window.kept,"
             " trials: document.querySelectorAll('.trial, .trial-error').length,"
             " baselines: document.querySelectorAll('g.baseline').length,"
             " row: (document.querySelector('tr[data-task-key] td:nth-child(3)') || {})"
             ".textContent})")
    with server.client("submitter") as api:
        job_id = api.submit(spec)["id"]
        try:
            while api.job(job_id)["trials"] < 4:
                time.sleep(0.1)
            with Page(CHROMIUM, tmp_path / "profile-open", _page(server, job_id)) as page:
                page.wait_for("document.body.dataset.live === 'stream' && "
                              "document.querySelectorAll('.trial, .trial-error').length >= 4")
                page.evaluate("window.kept = true")  # gone if the page were loaded again
                before = json.loads(page.evaluate(state))
                assert before["baselines"] == 2  # numpy and the peak, measured before tuning
                target = api.job(job_id)["trials"] + 8
                while api.job(job_id)["trials"] < target:
                    time.sleep(0.1)
                page.wait_for(f"document.querySelectorAll('.trial, .trial-error').length >= "
                              f"{target}", timeout=30)
                after = json.loads(page.evaluate(state))
                assert after["marker"] and after["live"] == "stream"  # redrawn in place
                assert after["trials"] > before["trials"] and int(after["row"]) >= target
                # the stream ends with the job: the page polls, and shows the end
                api.cancel(job_id)
                page.wait_for("document.body.dataset.live === 'poll' && "
                              "document.body.dataset.jobStatus === 'cancelled' && window.kept")
        finally:
            if api.job(job_id)["status"] in ("queued", "running"):
                api.cancel(job_id)


def test_the_page_fits_1024_pixels(server: Server, finished_job: dict, tmp_path: Path) -> None:
    job = finished_job["job"]
    page_url = (f"{server.url}/?job={job['id']}&best={job['tasks'][0]['workload_key']}"
                f"#token={server.tokens['reader']}")
    with Page(CHROMIUM, tmp_path / "profile-narrow", page_url, width=1024, height=768) as page:
        page.wait_for("document.body.dataset.ready === '1' && "
                      "document.querySelector('details.loop-ir') !== null")
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth, "
                               "document.querySelector('svg.curve-chart')"
                               ".getBoundingClientRect().right]")
    scroll, inner, chart_right = widths
    assert inner == 1024 and scroll <= inner and chart_right <= inner


def test_a_job_is_chosen_with_the_keyboard(server: Server, finished_job: dict,
                                           tmp_path: Path) -> None:
    job_id = finished_job["created"]["id"]
    with Page(CHROMIUM, tmp_path / "profile-keys",
              f"{server.url}/#token={server.tokens['reader']}") as page:
        page.wait_for(f"document.querySelector('tr.job[data-id=\"{job_id}\"]') !== null")
        assert page.evaluate("document.getElementById('job-title').textContent") == \
            "Select a job"
        page.evaluate(f"document.querySelector('tr.job[data-id=\"{job_id}\"]').focus()")
        page.press("Enter", 13)
        page.wait_for("document.querySelectorAll('svg.curve-chart').length === 1")
        assert page.evaluate("document.getElementById('job-title').textContent") == \
            f"Job {job_id}"
        assert page.evaluate("location.search") == f"?job={job_id}"
        # the focus stays on the chosen row through the redraw
        assert page.evaluate("document.activeElement.dataset.id") == job_id
