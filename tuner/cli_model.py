"""The model commands: ``tensortune tasks MODEL.onnx`` (the tuning tasks of a model),
``tensortune tune-model MODEL.onnx`` (tune them as one job), ``tensortune model-best JOB``
(each task's best record and the model's estimated latency), ``tensortune compile
MODEL.onnx -o model.tt`` (build it with the best tuned schedules into a self-contained
artefact) and ``tensortune run model.tt`` (run an artefact on inputs from an ``.npz`` file).

Importing a model parses it with the onnx package; nothing in it is executed as code.
``tune-model`` imports it in a sandbox process (as the API does with uploads): the tuning
process never parses the file.
``run`` loads the artefact's graph, weights and kernel library with the numpy-only runtime.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from .cli_common import CLIError, _database, _print_json, subcommand
from .cli_ir import flatten_value, load_npz, save_npz
from .cli_tune import add_run_options, add_search_options, report, run_with_progress, spec_options


def _target(args: argparse.Namespace) -> Any:
    from schedule import Target

    try:
        return Target.parse(args.target)
    except ValueError as exc:
        raise CLIError(f"bad --target: {exc}") from None


def _compile_error(exc: Exception) -> CLIError:
    return CLIError(f"{type(exc).__name__}: {exc}")


def _cmd_tasks(args: argparse.Namespace) -> int:
    from .model_compile import CompileError, model_tasks

    try:
        tasks = model_tasks(args.model, _target(args), args.db)
    except (CompileError, ValueError) as exc:
        raise _compile_error(exc) from None
    total = sum(t["flops"] * t["weight"] for t in tasks) or 1.0
    rows = [{k: v for k, v in t.items() if k != "workload"} |
            {"flops_share": t["flops"] * t["weight"] / total} for t in tasks]
    if args.json:
        _print_json({"model": args.model, "tasks": rows})
        return 0
    print(f"{'#':>3}  {'key':32}  {'weight':>6}  {'MFLOP':>9}  {'share':>6}  tuned  ops")
    for i, r in enumerate(rows):
        print(f"{i:>3}  {r['key']:32}  {r['weight']:>6}  {r['flops'] / 1e6:>9.2f}  "
              f"{r['flops_share']:>6.1%}  {'yes' if r['tuned'] else 'no':5}  "
              f"{' '.join(r['ops'])}")
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    from ir import tuned_flops_share

    from .model_compile import CompileError, compile

    start = time.perf_counter()
    try:
        model = compile(args.model, _target(args), args.db, strict=args.strict,
                        executor=args.executor)
        path = model.export(args.output)
    except (CompileError, ValueError, OSError, MemoryError) as exc:
        raise _compile_error(exc) from None
    tasks = [{"name": t.name, "key": t.key, "count": t.count, "flops": t.flops,
              "tuned": t.tuned, "note": t.note} for t in model.tasks]
    if args.executor == "graph":
        memory = {"activation_bytes_unshared": model.memory.bytes_unshared,
                  "activation_bytes_planned": model.memory.bytes_planned}
        memory_text = (f"activations {model.memory.bytes_unshared / 2**20:.1f} MiB -> "
                       f"{model.memory.bytes_planned / 2**20:.1f} MiB with the memory plan")
    else:
        memory = {"activation_bytes_planned": model.meta["storage_bytes"]}
        memory_text = (f"static activation buffers {model.meta['storage_bytes'] / 2**20:.1f} "
                       "MiB")
    summary = {"model": args.model, "output": str(path), "executor": args.executor,
               "tasks": tasks, "tuned_flops_share": tuned_flops_share(model.tasks),
               "memory": memory, "seconds": time.perf_counter() - start}
    if args.json:
        _print_json(summary)
        return 0
    for t in model.tasks:
        state = "tuned" if t.tuned else "default"
        print(f"  {state:8} x{t.count:<3} {t.name} ({t.key}){'  ' + t.note if t.note else ''}")
    hits = sum(t.tuned for t in model.tasks)
    print(f"{hits}/{len(model.tasks)} tasks tuned ({summary['tuned_flops_share']:.1%} of the "
          f"FLOPs); {memory_text}")
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _cmd_tune_model(args: argparse.Namespace) -> int:
    from .jobs import submit_job
    from .model_import import ModelImportError, import_model_tasks
    from .model_tune import budget_warning
    from .spec import JobSpec, SpecError

    try:  # the model file is parsed and its tasks extracted in a sandbox, as for uploads
        with open(args.model, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise CLIError(f"cannot read the model: {exc}") from None
    try:
        found = import_model_tasks(data, args.model, _target(args))
        spec = JobSpec(found.tasks, args.target, args.trials, model=found.info,
                       **spec_options(args))
    except (ModelImportError, SpecError) as exc:
        raise CLIError(str(exc)) from None
    warning = budget_warning(spec)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    with _database(args.db) as database:
        job = submit_job(database, spec)
        if not args.json and not args.quiet:
            print(f"job {job.id}: tuning {len(spec.tasks)} tasks of {found.info.name} on "
                  f"{spec.target}, {spec.trials} trials (resume with `tensortune jobs "
                  f"resume {job.id}`; `tensortune model-best {job.id}` gives the best)",
                  file=sys.stderr)
        return report(args, run_with_progress(args, database, job.id, spec))


def _cmd_model_best(args: argparse.Namespace) -> int:
    from db import NotFoundError

    from .model_tune import model_best
    from .spec import SpecError

    with _database(args.db) as database:
        try:
            answer = model_best(database, args.job_id)
        except (NotFoundError, SpecError) as exc:
            raise CLIError(str(exc)) from None
    if args.json:
        _print_json(answer)
        return 0
    print(f"model {answer['model']['name']} (job {answer['job_id']}, {answer['status']}) "
          f"on {answer['target']}")
    for t in answer["tasks"]:
        best = (f"{t['best_latency_s'] * 1e3:9.4f} ms x{t['weight']:g}"
                if t["best_latency_s"] is not None else "   no record")
        print(f"  {best}  {t['workload_key']}  {t['name']}")
    if answer["estimated_latency_s"] is None:
        print(f"estimated latency: unknown ({len(answer['missing'])} tasks without a record)")
    else:
        print(f"estimated latency in the tuned kernels: "
              f"{answer['estimated_latency_s'] * 1e3:.4f} ms")
    return 0


def _load_artefact(path: str) -> tuple[Any, str]:
    """A compiled model and its executor: a ``.tt`` file (graph) or an AOT directory."""
    from pathlib import Path

    from ir import aot_runtime, runtime

    try:
        if Path(path).is_dir():
            return aot_runtime.load(path), "aot"
        return runtime.load(path), "graph"
    except (OSError, ValueError, KeyError) as exc:
        raise CLIError(f"cannot load {path}: {exc}") from None


def _cmd_run(args: argparse.Namespace) -> int:
    model, executor = _load_artefact(args.artefact)
    inputs = load_npz(args.inputs)
    try:
        result = model(**inputs)
    except (TypeError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    # the graph runtime times its kernels on the inputs set; an AOT call is one native call
    timed = model.run if executor == "graph" else lambda: model(**inputs)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        timed()
        times.append(time.perf_counter() - t0)
    names = (model.graph.get("output_names") if executor == "graph" else
             model.output_names) or []
    tensors = flatten_value(result)
    if len(names) != len(tensors):
        names = [f"out_{i}" for i in range(len(tensors))]
    arrays = dict(zip(names, tensors, strict=True))
    save_npz(args.output, arrays)
    latency = float(np.median(times)) if times else None
    if args.json:
        _print_json({"artefact": args.artefact, "executor": executor, "latency_s": latency,
                     "outputs": {n: {"shape": list(a.shape), "dtype": str(a.dtype)}
                                 for n, a in arrays.items()}})
        return 0
    for n, a in arrays.items():
        print(f"{n}: {a.dtype}{list(a.shape)}")
    if latency is not None:
        print(f"latency {latency * 1e3:.3f} ms (median of {len(times)} runs after a warm-up, "
              f"{executor} executor)")
    return 0


def add_model_commands(commands: Any) -> None:
    """Register ``tasks``, ``compile`` and ``run`` on the ``tensortune`` subparsers."""
    tasks = subcommand(
        commands, "tasks", _cmd_tasks,
        help="list a model's tuning tasks",
        description=("Import MODEL (ONNX), optimise and fuse it as `compile` does, and list\n"
                     "the tuning tasks: workload key, weight (occurrences), FLOPs, share of\n"
                     "the model's FLOPs, whether the database has a record on the target."),
        epilog="examples:\n  tensortune tasks resnet18.onnx --target cpu\n"
               "  tensortune tasks resnet18.onnx --json")
    tasks.add_argument("model", metavar="MODEL", help="an ONNX model file")
    tasks.add_argument("--target", default="cpu", help="the target (default: this CPU)")
    comp = subcommand(
        commands, "compile", _cmd_compile,
        help="build a model with the best tuned schedules",
        description=("Import MODEL (ONNX), optimise and fuse it, take each task's best record\n"
                     "on the target from the database (a default schedule otherwise), build\n"
                     "the kernels into one library and write a self-contained artefact\n"
                     "(graph, weights, kernels, runtime) that `tensortune run` or the\n"
                     "numpy-only runtime loads."),
        epilog="examples:\n  tensortune compile resnet18.onnx --target cpu -o resnet18.tt\n"
               "  tensortune compile resnet18.onnx --strict --db sqlite:///tuning.db "
               "-o r.tt\n  tensortune compile resnet18.onnx --executor aot -o resnet18.aot")
    comp.add_argument("model", metavar="MODEL", help="an ONNX model file")
    comp.add_argument("--target", default="cpu", help="the target (default: this CPU)")
    comp.add_argument("-o", "--output", required=True, metavar="FILE",
                      help="where to write the artefact (e.g. model.tt)")
    comp.add_argument("--strict", action="store_true",
                      help="fail when a task has no tuning record")
    comp.add_argument("--executor", choices=("graph", "aot"), default="graph",
                      help="graph: a .tt file for the graph runtime (default); aot: one C "
                           "translation unit, written as a directory")
    tune = commands.add_parser(
        "tune-model", help="tune every task of a model as one job",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=("Import MODEL (ONNX), extract its tasks as `compile` does, and tune them\n"
                     "as one job: the task scheduler gives trials where weight x latency\n"
                     "drops fastest. Progress shows the tasks with a program and the model's\n"
                     "estimated latency (the weighted sum of the tasks' best latencies);\n"
                     "`compile` then builds the model with the records."),
        epilog="examples:\n  tensortune tune-model resnet18.onnx --trials 2000\n"
               "  tensortune tune-model bert.onnx --trials 500 --db sqlite:///t.db --json")
    tune.add_argument("model", metavar="MODEL", help="an ONNX model file")
    tune.add_argument("--target", default="cpu", help="the target (default: this CPU)")
    add_search_options(tune)
    add_run_options(tune)
    tune.set_defaults(handler=_cmd_tune_model)
    best = subcommand(
        commands, "model-best", _cmd_model_best,
        help="the best record of each task of a model's job, and the model's estimate",
        description=("For the model job JOB (from `tune-model` or a model upload): each task's\n"
                     "best record on the job's target (from any job) and the model's\n"
                     "estimated latency in its tuned kernels (weight x best, summed)."),
        epilog="examples:\n  tensortune model-best 3f2a...\n  tensortune model-best 3f2a... --json")
    best.add_argument("job_id", metavar="JOB")
    run = subcommand(
        commands, "run", _cmd_run, db=False,
        help="run a compiled model artefact",
        description=("Load ARTEFACT (from `tensortune compile`: a .tt file, or the directory\n"
                     "of --executor aot) and run it on inputs from an .npz file named as the\n"
                     "model's graph inputs; outputs are saved under the graph's output names.\n"
                     "--repeat N times N more runs (the reported latency is their median,\n"
                     "after the first run as a warm-up)."),
        epilog="examples:\n  tensortune run model.tt --inputs in.npz --output out.npz\n"
               "  tensortune run model.tt --inputs in.npz --repeat 20 --json")
    run.add_argument("artefact", metavar="ARTEFACT",
                     help="a compiled model (.tt file or AOT directory)")
    run.add_argument("--inputs", required=True, metavar="NPZ", help="inputs by name")
    run.add_argument("--output", metavar="NPZ", help="where to save the outputs")
    run.add_argument("--repeat", type=int, default=10, metavar="N",
                     help="timed runs after the first (default 10)")
