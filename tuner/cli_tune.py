"""The tuning commands of ``tensortune``: ``tune``, ``ops``, ``best`` and ``jobs``.

``tune`` runs a job in this process with a progress bar; ``jobs resume`` runs a stopped
one on from its records. Expected failures (bad operator or parameter, unknown target,
unreachable database, unknown job) end as one ``CLIError`` line.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

from db import JobStateError, NotFoundError
from schedule import Target, Workload, build, make_schedule, ops
from search import COST_MODELS, POLICIES
from workers import BASELINES, RAY_ADDRESS_ENV, RayAccessError

from .cli_common import (
    DB_HELP,
    CLIError,
    _database,
    _print_json,
    add_ray_options,
    command_group,
    subcommand,
)
from .jobs import cancel_job, resume_job, run_job, submit_job
from .progress import TuneResult
from .scheduler import SCHEDULERS
from .shared_pool import measurement_pool
from .spec import JobSpec, SpecError, TaskSpec, error_message

DEFAULT_TRIALS = 64


def _param(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def workload_from_args(op_name: str, params: list[tuple[str, str]]) -> Workload:
    """The workload named by ``--op`` and ``-p NAME=VALUE`` options."""
    texts: dict[str, str] = {}
    for name, value in params:
        if name in texts:
            raise CLIError(f"parameter {name} given twice")
        texts[name] = value
    try:
        spec = ops.get_op(op_name)
        return Workload.op(op_name, **spec.parse_strings(texts))
    except (KeyError, ValueError, TypeError) as err:
        raise CLIError(error_message(err)) from None


class ProgressBar:
    """A progress line on stderr: trials done, best latency and GFLOP/s per batch."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="trial", file=sys.stderr, dynamic_ncols=True)

    def __call__(self, event: dict[str, Any]) -> None:
        if self.bar is None or event.get("type") != "batch":
            return
        self.bar.update(event["trials"] - self.bar.n)
        best = [t for t in event["tasks"] if t["best_latency_s"] is not None]
        if len(event["tasks"]) > 1:
            estimate = event.get("estimated_latency_s")
            self.bar.set_postfix_str(
                f"{len(best)}/{len(event['tasks'])} tasks with a program" +
                (f", model estimate {estimate * 1e3:.4g} ms" if estimate else ""))
        elif best:
            lead = max(best, key=lambda t: t["best_gflops"] or 0)
            self.bar.set_postfix_str(f"best {lead['best_latency_s'] * 1e3:.3f} ms, "
                                     f"{lead['best_gflops'] or 0:.1f} GFLOP/s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def tune_summary(result: TuneResult) -> dict[str, Any]:
    """The ``--json`` summary of a finished job (single-workload fields at the top level);
    ``numpy_latency_s``: the numpy baseline the job measured on its device, if it did."""
    tasks = []
    for task in result.tasks:
        entry = task.to_json()
        entry.pop("curve")
        numpy = task.baselines.get("numpy", {}).get("latency_s")
        if numpy:
            entry["numpy_latency_s"] = numpy
        tasks.append(entry)
    summary: dict[str, Any] = {"job_id": result.job_id, "status": result.status,
                               "target": result.target, "trials": result.trials,
                               "errors": result.errors(), "seconds": result.seconds.to_json(),
                               "error": result.error, "tasks": tasks,
                               "estimated_latency_s": result.estimated_latency_s}
    if len(tasks) == 1:
        for name in ("workload_key", "best_latency_s", "best_gflops", "numpy_latency_s"):
            if name in tasks[0]:
                summary[name] = tasks[0][name]
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    lines = [f"job {summary['job_id']}: {summary['status']}, {summary['trials']} trials on "
             f"{summary['target']}"]
    if summary["error"]:
        lines.append(f"  error: {summary['error']}")
    if summary["status"] == "failed":
        lines.append(f"  what was measured is kept: `tensortune jobs resume "
                     f"{summary['job_id']}` goes on from it")
    for task in summary["tasks"]:
        lines.append(f"  {task['name']}  [{task['workload_key']}]")
        if task["best_latency_s"] is None:
            lines.append(f"    no valid program found ({task['state']}); errors: "
                         f"{task['errors'] or 'none'}")
            continue
        lines.append(f"    best {task['best_latency_s'] * 1e3:.4f} ms = "
                     f"{task['best_gflops'] or 0:.1f} GFLOP/s"
                     f"{' (confirmed)' if task['confirmed'] else ''}")
        lines.extend(_baseline_lines(task))
        facts = task.get("best_facts")
        if facts and "cycles" in facts:
            utilised = 100 * facts.get("mac_utilization", 0)
            lines.append(f"    simulated: {facts['cycles']:,} cycles at "
                         f"{facts['clock_mhz']:g} MHz, GEMM core {utilised:.1f}% utilised "
                         "(the latency above is the simulated time)")
        if task.get("disturbed"):
            lines.append(f"    the machine was busy: {task['disturbed']} of {task['trials']} "
                         "figures stayed disturbed after re-measuring (slowdown up to "
                         f"{task['max_noise']:.2f}x); the search did not learn from them")
        if task.get("unpreempted"):
            lines.append(f"    the machine was busy: {task['unpreempted']} figures are of the "
                         "short repeats that ran with nothing else on the cores")
        if task.get("reranked"):
            lines.append(f"    ranked side by side: {task['reranked']}")
        if task.get("unconfirmed"):
            lines.append(f"    not confirmed: {task['unconfirmed']}")
        if task["errors"]:
            lines.append(f"    failed candidates: {task['errors']}")
    if len(summary["tasks"]) > 1 and summary["estimated_latency_s"] is not None:
        lines.append(f"  estimated latency of the whole (weight x best, summed over "
                     f"{len(summary['tasks'])} tasks): "
                     f"{summary['estimated_latency_s'] * 1e3:.4f} ms")
    seconds = summary["seconds"]
    per_trial = seconds["total"] / max(summary["trials"], 1)
    lines.append(f"  time {seconds['total']:.1f} s ({per_trial:.2f} s/trial): search "
                 f"{seconds['search']:.1f}, measure {seconds['measure']:.1f}, database "
                 f"{seconds['database']:.1f}")
    return "\n".join(lines)


def _baseline_lines(task: dict[str, Any]) -> list[str]:
    """The task's baselines (measured on the job's device) against its best."""
    lines, best = [], task["best_latency_s"]
    for name, baseline in task["baselines"].items():
        latency = baseline.get("latency_s")
        if not latency:
            lines.append(f"    {name}: not measured ({baseline.get('error') or 'no figure'})")
        elif name == "peak" and latency < best:
            lines.append(f"    {latency / best:.0%} of the target's float32 multiply-add peak "
                         f"(measured: {task['flops'] / latency / 1e9:.0f} GFLOP/s)")
        elif name == "peak":  # a bound the kernel beat was itself measured on a busy core
            lines.append(f"    peak: measured {task['flops'] / latency / 1e9:.0f} GFLOP/s, "
                         "below the tuned kernel's own rate: the machine was busy while it "
                         "was measured, so no fraction of peak is given")
        else:
            lines.append(f"    {name} {latency * 1e3:.4f} ms (same device): tuned is "
                         f"{latency / best:.2f}x {name}")
    return lines


def run_with_progress(args: argparse.Namespace, database: Any, job_id: str, spec: JobSpec,
                       resume: bool = False) -> TuneResult:
    bar = ProgressBar(spec.trials, enabled=not args.json and not args.quiet)
    try:
        try:
            pool = measurement_pool(spec.measure, args.ray_address)
        except RayAccessError as exc:  # the head went away since the command's check
            raise CLIError(f"{exc} (job {job_id} is kept: `tensortune jobs resume "
                           f"{job_id}` goes on)") from None
        with pool:
            if resume:
                return resume_job(database, job_id, pool, bar, force=args.force, spec=spec)
            return run_job(database, job_id, pool, bar, spec=spec)
    finally:
        bar.close()


def report(args: argparse.Namespace, result: TuneResult) -> int:
    summary = tune_summary(result)
    if args.json:
        _print_json(summary)
    else:
        print(format_summary(summary))
    return 0 if result.status in ("succeeded", "cancelled") else 1


def _cmd_tune(args: argparse.Namespace) -> int:
    workload = workload_from_args(args.op, args.params)
    try:
        spec = JobSpec((TaskSpec(workload),), args.target, args.trials, **spec_options(args))
    except SpecError as err:
        raise CLIError(str(err)) from None
    with _database(args.db) as database:
        job = submit_job(database, spec)
        if not args.json and not args.quiet:
            print(f"job {job.id}: tuning {workload!r} on {spec.target}, {spec.trials} trials "
                  f"(resume with `tensortune jobs resume {job.id}`)", file=sys.stderr)
        result = run_with_progress(args, database, job.id, spec)
        return report(args, result)


def _cmd_ops(args: argparse.Namespace) -> int:
    names = ops.list_ops()
    if args.json:
        _print_json({name: ops.get_op(name).json_schema() for name in names})
        return 0
    for name in names:
        spec = ops.get_op(name)
        params = []
        for p in spec.params:
            params.append(p.name if p.required else f"{p.name}={_show(p.default)}")
        print(f"{name:24s} {' '.join(params)}")
        print(f"{'':24s} {spec.description}")
    return 0


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _cmd_best(args: argparse.Namespace) -> int:
    workload = workload_from_args(args.op, args.params)
    try:
        target = Target.parse(args.target).canonical
    except ValueError as err:
        raise CLIError(f"target: {err}") from None
    with _database(args.db) as database:
        answer = database.best(workload.key, target, k=1)
    if not answer.records:
        raise CLIError(f"no tuning record for {workload!r} (key {workload.key}) on {target}; "
                       f"tune it with `tensortune tune --op {args.op} ...`")
    record = answer.records[0]
    cost = record.median_cost or math.inf
    payload: dict[str, Any] = {
        "workload_key": workload.key, "target": target, "latency_s": cost,
        "gflops": workload.flops / cost / 1e9, "measured_at": record.timestamp,
        "device_model": record.device_model, "job_id": record.job_id, "steps": record.steps}
    if args.source:
        s, tensors = make_schedule(workload, record.steps)
        payload["source"] = build(s, tensors, target=target).source
    if args.json:
        _print_json(payload)
        return 0
    print(f"{workload!r} on {target}")
    print(f"  best {cost * 1e3:.4f} ms = {payload['gflops']:.1f} GFLOP/s, measured "
          f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(record.timestamp))} on "
          f"{record.device_model or 'unknown device'} (job {record.job_id})")
    print("  steps:")
    for step in record.steps:
        print(f"    {step}")
    if args.source:
        print(payload["source"])
    return 0


# --- jobs -------------------------------------------------------------------------------


def _job_line(job: Any) -> str:
    progress = job.progress
    done = progress.get("trials", 0)
    budget = progress.get("trial_budget") or job.spec.get("trials", "?")
    names = ", ".join(t.get("name", "?").split("(")[0] for t in progress.get("tasks", [])) or \
        ", ".join(w.get("workload", w).get("op", "dag") for w in job.spec.get("workloads", []))
    created = time.strftime("%Y-%m-%d %H:%M", time.localtime(job.created_at))
    return f"{job.id}  {job.status:9s}  {done}/{budget} trials  {created}  {names}"


def _cmd_jobs_list(args: argparse.Namespace) -> int:
    with _database(args.db) as database:
        jobs = database.jobs.list(status=args.status, limit=args.limit)
    if args.json:
        _print_json([_job_json(job) for job in jobs])
    elif not jobs:
        print("no jobs")
    else:
        for job in jobs:
            print(_job_line(job))
    return 0


def _job_json(job: Any) -> dict[str, Any]:
    return {"id": job.id, "status": job.status, "spec": job.spec, "progress": job.progress,
            "error": job.error, "created_at": job.created_at, "started_at": job.started_at,
            "finished_at": job.finished_at}


def _cmd_jobs_show(args: argparse.Namespace) -> int:
    with _database(args.db) as database:
        try:
            job = database.jobs.get(args.job_id)
        except NotFoundError as err:
            raise CLIError(str(err)) from None
    if args.json:
        _print_json(_job_json(job))
        return 0
    print(_job_line(job))
    if job.error:
        print(f"  error: {job.error}")
    for task in job.progress.get("tasks", []):
        best = task.get("best_latency_s")
        best_text = (f"best {best * 1e3:.4f} ms = {task.get('best_gflops') or 0:.1f} GFLOP/s"
                     if best is not None else "no valid program yet")
        print(f"  {task['name']}: {task['state']}, {task['trials']} trials, {best_text}"
              f"{', errors ' + str(task['errors']) if task.get('errors') else ''}")
    return 0


def _cmd_jobs_resume(args: argparse.Namespace) -> int:
    with _database(args.db) as database:
        try:
            job = database.jobs.get(args.job_id)
            spec = JobSpec.from_json(job.spec)
            result = run_with_progress(args, database, job.id, spec, resume=True)
        except (NotFoundError, JobStateError, SpecError) as err:
            raise CLIError(str(err)) from None
        return report(args, result)


def _cmd_jobs_cancel(args: argparse.Namespace) -> int:
    with _database(args.db) as database:
        try:
            job = cancel_job(database, args.job_id)
        except (NotFoundError, JobStateError) as err:
            raise CLIError(str(err)) from None
    print(f"job {job.id}: {job.status}")
    return 0


# --- argument parsers -------------------------------------------------------------------


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL", help=DB_HELP)
    add_ray_options(parser, "measure on this Ray cluster (host:port, or 'local' to start "
                            f"Ray here; default: ${RAY_ADDRESS_ENV}, else a local process "
                            "pool)")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON summary at the end instead of text")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_workload_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op", required=True, metavar="NAME",
                        help="operator name (see `tensortune ops`)")
    parser.add_argument("-p", dest="params", action="append", type=_param, default=[],
                        metavar="NAME=VALUE", help="an operator parameter (repeat for each)")
    parser.add_argument("--target", default="cpu",
                        help="target string (default: cpu, this machine's CPU)")


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value
    return parse


def add_search_options(parser: argparse.ArgumentParser) -> None:
    """The job options of ``tune`` and ``tune-model`` (read back by :func:`spec_options`)."""
    parser.add_argument("--trials", type=_positive(int), default=DEFAULT_TRIALS,
                      help=f"measured candidates in total (default {DEFAULT_TRIALS})")
    parser.add_argument("--batch-size", type=_positive(int), default=32,
                      help="candidates per measured batch (default 32)")
    parser.add_argument("--time-budget", type=_positive(float), metavar="SECONDS",
                      help="start no new batch after this many seconds "
                           "(the first batch always runs)")
    parser.add_argument("--early-stop", type=_positive(int), metavar="N",
                      help="stop after N trials without improvement")
    parser.add_argument("--cost-model", choices=COST_MODELS, default="xgb",
                      help="the model that ranks candidates (default xgb)")
    parser.add_argument("--policy", choices=tuple(POLICIES), default="sketch",
                      help="sketch: evolutionary sketch search (default); random: pure "
                           "random sampling")
    parser.add_argument("--isolated-tasks", dest="share_across_tasks", action="store_false",
                        help="each workload learns alone: its own cost model, no programs "
                             "suggested by the others (by default they share both)")
    parser.add_argument("--scheduler", choices=SCHEDULERS, default="gradient",
                      help="how trials are shared between workloads (default gradient)")
    parser.add_argument("--reconfirm", type=int, default=3, metavar="K",
                      help="re-measure the K best programs at the end (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the search")
    parser.add_argument("--baselines", type=_baselines, default=("numpy", "peak"),
                        metavar="LIST",
                        help="what to measure each workload against on the same device "
                             f"before tuning, comma-separated out of {', '.join(BASELINES)}, "
                             "or 'none' (default numpy,peak; torch where installed)")


def spec_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``JobSpec`` fields given by :func:`add_search_options`'s options."""
    return {"batch_size": args.batch_size, "time_budget_s": args.time_budget,
            "early_stop": args.early_stop, "scheduler": args.scheduler,
            "policy": args.policy, "cost_model": args.cost_model,
            "share_across_tasks": args.share_across_tasks, "reconfirm": args.reconfirm,
            "seed": args.seed, "baselines": args.baselines}


def _baselines(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip() and n.strip() != "none")
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown baseline(s) {', '.join(unknown)}; "
                                         f"choose out of {', '.join(BASELINES)} or none")
    return names


def add_tuning_commands(commands: Any) -> None:
    """Register ``tune``, ``ops``, ``best`` and ``jobs``."""
    fmt = argparse.RawDescriptionHelpFormatter
    tune = commands.add_parser(
        "tune", help="tune an operator on a target", formatter_class=fmt,
        description="Search for the fastest program of one operator workload on a target,\n"
                    "measuring every candidate and storing it in the database (as a job that\n"
                    "can be resumed). Prints the best latency against numpy's.",
        epilog="examples:\n"
               "  tensortune tune --op matmul -p M=1024 -p N=1024 -p K=1024 --trials 1000\n"
               "  tensortune tune --op conv2d_nchw -p N=1 -p C=64 -p H=56 -p W=56 -p K=64 \\\n"
               "      -p R=3 -p S=3 -p padding=1 --trials 256 --time-budget 600 --json\n"
               "  tensortune tune --op matmul -p M=256 -p N=256 -p K=256 --policy random")
    _add_workload_options(tune)
    add_search_options(tune)
    add_run_options(tune)
    tune.set_defaults(handler=_cmd_tune)

    subcommand(
        commands, "ops", _cmd_ops, help="list the operators and their parameters", db=False,
        description="The registered operators, each with its parameters (NAME or\n"
                    "NAME=DEFAULT), as used by `tune --op NAME -p NAME=VALUE`.",
        epilog="examples:\n  tensortune ops\n  tensortune ops --json",
        json_help="print each operator's parameters as a JSON schema")

    best = subcommand(
        commands, "best", _cmd_best, help="print the best tuned program of an operator",
        description="The fastest recorded program of a workload on a target: latency,\n"
                    "GFLOP/s, when and where it was measured, its steps (and its source).",
        epilog="examples:\n  tensortune best --op matmul -p M=1024 -p N=1024 -p K=1024\n"
               "  tensortune best --op matmul -p M=64 -p N=64 -p K=64 --source --json",
        json_help="print the answer as JSON")
    _add_workload_options(best)
    best.add_argument("--source", action="store_true", help="also print the generated source")

    sub = command_group(
        commands, "jobs", help="list, show, resume or cancel tuning jobs",
        description="Tuning jobs stored in the database.",
        epilog="examples:\n  tensortune jobs list --status running\n"
               "  tensortune jobs show 3f2a...\n  tensortune jobs resume 3f2a...\n"
               "  tensortune jobs cancel 3f2a...",
        title="actions", metavar="ACTION")
    listing = subcommand(sub, "list", _cmd_jobs_list, help="the newest jobs first")
    listing.add_argument("--status", choices=("queued", "running", "succeeded", "failed",
                                              "cancelled"))
    listing.add_argument("--limit", type=_positive(int), default=50)
    show = subcommand(sub, "show", _cmd_jobs_show,
                      help="a job's status and per-workload progress")
    show.add_argument("job_id")
    resume = subcommand(sub, "resume", _cmd_jobs_resume, db=False, json_help=None,
                        help="run a stopped job on from its records")
    resume.add_argument("job_id")
    resume.add_argument("--force", action="store_true",
                        help="resume a job marked running that reported progress in the "
                             "last minute from a process this machine cannot check (another "
                             "host): that process must really be gone")
    add_run_options(resume)
    cancel = subcommand(sub, "cancel", _cmd_jobs_cancel, json_help=None,
                        help="stop a job at its next batch, keeping its records")
    cancel.add_argument("job_id")

