"""Screenshots of the dashboard for the README: a finished GEMM job (every trial a point,
the best-so-far step line, the re-measured best) and a job whose candidates fail (marked by
error kind). Starts ``tensortune serve --no-auth`` on a free loopback port with a fresh
database, runs both jobs through the REST API, and has headless Chromium draw the page.

    .venv/bin/python bench/dashboard_screenshots.py [--trials 64] [--out bench/results]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tuner.client import Client  # noqa: E402


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _screenshot(url: str, out: Path, profile: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no Chromium here (Debian: apt-get install chromium)")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--user-data-dir={profile}", "--window-size=1400,1000",
                    "--virtual-time-budget=6000", f"--screenshot={out}", url],
                   capture_output=True, timeout=120, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tt-dashboard-"))
    port = _free_port()
    env = {**os.environ, "TENSORTUNE_HOME": str(home),
           "TENSORTUNE_DB_URL": f"sqlite:///{home / 'tuning.db'}"}
    server = subprocess.Popen([sys.executable, "-m", "tuner", "serve", "--no-auth", "--port",
                               str(port), "--log-level", "warning"], env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        gemm = {"workloads": [{"op": "matmul", "params": {"M": 256, "N": 256, "K": 256}}],
                "target": "cpu", "trials": args.trials, "batch_size": 16, "reconfirm": 1}
        failing = {"workloads": [{"op": "conv2d_nchw", "params": {
            "N": 1, "C": 16, "H": 28, "W": 28, "K": 16, "R": 3, "S": 3, "padding": 1}}],
            "target": "cpu", "trials": 16, "batch_size": 8, "reconfirm": 0,
            "measure": {"compile_timeout": 0.001}}
        with Client(url) as api:
            jobs = {}
            for name, spec in (("gemm", gemm), ("failed_candidates", failing)):
                job = api.submit(spec)
                list(api.events(job["id"], timeout=3600))
                jobs[name] = job["id"]
        args.out.mkdir(parents=True, exist_ok=True)
        for name, job_id in jobs.items():
            out = args.out / f"dashboard_{name}.png"
            _screenshot(f"{url}/?job={job_id}", out, home / f"profile-{name}")
            print(out)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
