"""The ahead-of-time compiler: a static model becomes one C translation unit — every
kernel, static storage for the planned intermediate buffers, and a generated ``tt_run``
that calls the kernels in order on those buffers — compiled into one shared library that
runs the whole model in one call, with no Python between kernels.

The front half is ``ir.build``'s: the same pipeline (``optimize``), graph plan, memory plan
(temporaries whose lifetimes do not overlap share a storage buffer) and one kernel per
distinct workload key, scheduled from ``schedules`` exactly as ``build`` does, so tuned
schedules apply identically. What differs is who drives the kernels: generated C instead
of the graph runtime. The model's outputs are written straight into the caller's buffers;
an output that is an input, a parameter or another output is copied there.

Each kernel's source is pasted in whole; its file-scope ``static`` names and ``typedef``s
(helpers every kernel defines) are renamed for that kernel with ``#define`` / ``#undef``,
and the kernels are hidden symbols of the library. The library's C interface, the
``AotModel`` that calls it and the artefact format are in ``aot_runtime`` (numpy and
ctypes only), which also gives ``load``.

A partitioned function (``Compiler`` attribute: an external codegen's region) is called
through a function pointer the ``AotModel`` sets when it loads the library: the codegen's
module, run on views of the buffers (such a model does not export: its codegen runs it).

Refused (``AotCompileError``, a ``GraphBuildError``): fused functions without a compiled
kernel (those the graph executor runs on numpy) — AOT code has no Python to run them on;
and, as by the graph executor, anything that is not a static dataflow graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..expr import Function
from ..module import Module
from .aot_runtime import AOT_VERSION, AotModel, buffer_alignment, load
from .build import KernelSet, Schedules, _output_names, _plan
from .graph_executor import GraphBuildError, GraphPlan, _nbytes
from .lower import lower_primitive, operator_names

__all__ = ["AOT_VERSION", "AotCompileError", "AotModel", "aot_compile", "compile_plan", "load"]


# file-scope names a kernel's source defines for itself: static functions or variables,
# and typedefs (the name before an optional attribute and the closing semicolon)
_STATIC = re.compile(r"^static\b[^=;(\[]*?\b([A-Za-z_]\w*)\s*[(\[=;]", re.MULTILINE)
_TYPEDEF = re.compile(r"^typedef\b[^;]*?\b([A-Za-z_]\w*)\s*(?:__attribute__\b.*)?;\s*$",
                      re.MULTILINE)
_INCLUDE = re.compile(r"^#include\s*<[^>]+>", re.MULTILINE)


class AotCompileError(GraphBuildError):
    """The model cannot be compiled ahead of time (see the module docstring)."""


def aot_compile(module: Module, target: Any = "cpu", schedules: Schedules = None,
                opt_level: int = 3, default_schedule: Callable[[Any], Any] | None = None
                ) -> AotModel:
    """Compile ``module``'s ``@main`` ahead of time into one library (see the module
    docstring); ``target``, ``schedules``, ``opt_level`` and ``default_schedule`` as for
    ``ir.build``."""
    from schedule import Target

    target = Target.parse(target) if not isinstance(target, Target) else target
    main, plan, _ = _plan(module, opt_level, target)  # (the memory plan is in plan's entries)
    return compile_plan(main, plan, target, schedules, default_schedule)


def compile_plan(main: Function, plan: GraphPlan, target: Any, schedules: Schedules,
                 default_schedule: Callable[[Any], Any] | None) -> AotModel:
    """The ``AotModel`` of fused function ``main`` whose graph plan (memory planned) is
    ``plan`` (the VM compiles its static functions this way too)."""
    from schedule import compile_source

    from .external import external_function

    lowered = [None if func.attrs.get("Compiler") else lower_primitive(func)
               for func, _, _ in plan.calls]
    refused = [f"{lw.name} ({', '.join(operator_names(lw.function))}: {lw.reason})"
               for lw in lowered if lw is not None and lw.workload is None]
    if refused:
        raise AotCompileError("AOT compilation needs a compiled kernel for every fused "
                              "function; these have none (the graph executor, ir.build, "
                              f"runs them on numpy): {'; '.join(refused)}")
    kernels = KernelSet(target, schedules, default_schedule)
    calls, externals = [], []
    for lw, (func, inputs, outs) in zip(lowered, plan.calls, strict=True):
        if lw is None:
            args = [*(g[0] for g in inputs), *outs]
            calls.append((f"tt_ext{len(externals)}", args, str(func.attrs["global_symbol"])))
            externals.append((external_function(func), [plan.entries[i] for i in args],
                              len(inputs)))
        else:
            calls.append((kernels.entry(lw), [*(inputs[p][0] for p in lw.param_order), *outs],
                          lw.name))
    source, storage_bytes = _translation_unit(plan, kernels.sources, calls, len(externals))
    library, _ = compile_source(source, target.compiler_flags())

    def spec(i: int, name: str) -> dict[str, Any]:
        return {"name": name, "shape": plan.entries[i]["shape"],
                "dtype": plan.entries[i]["dtype"]}

    params = {e["name"]: i for i, e in enumerate(plan.entries) if e["kind"] == "param"}
    meta = {"version": AOT_VERSION,
            "inputs": [spec(i, n) for i, n in zip(plan.inputs, plan.input_names, strict=True)],
            "outputs": [spec(i, n) for i, n in zip(
                plan.outputs, _output_names(main, len(plan.outputs)), strict=True)],
            "output_structure": plan.output_structure,
            "params": [spec(params[n], n) for n in plan.params],
            "calls": [name for _, _, name in calls],
            "target": str(target), "storage_bytes": storage_bytes,
            "externals": [{"symbol": name, "args": [[e["shape"], e["dtype"]] for e in specs],
                           "inputs": n_in}
                          for (_, specs, n_in), (_, _, name) in zip(
                              externals, [c for c in calls if c[0].startswith("tt_ext")],
                              strict=True)]}
    return AotModel(library, meta, plan.params, source, kernels.reports,
                    externals=[module for module, _, _ in externals])


def _renamed(source: str, suffix: str) -> str:
    """``source`` with its file-scope static and typedef names renamed to ``<name><suffix>``
    (by the preprocessor, so the text stays as generated)."""
    names = sorted(set(_STATIC.findall(source)) | set(_TYPEDEF.findall(source)))
    return "\n".join([*(f"#define {n} {n}{suffix}" for n in names), source,
                      *(f"#undef {n}" for n in names)])


def _translation_unit(plan: GraphPlan, sources: list[str],
                      calls: list[tuple[str, list[int], str]], n_external: int = 0
                      ) -> tuple[str, int]:
    """The C source of the whole model, and the bytes of its static storage."""
    outputs: dict[int, int] = {}  # a computed output's entry -> its (first) output index
    for j, i in enumerate(plan.outputs):
        if plan.entries[i]["kind"] == "temp":
            outputs.setdefault(i, j)
    params = {name: j for j, name in enumerate(plan.params)}
    storages: dict[int, int] = {}  # storage id -> bytes, of the storage still used
    for _, args, _ in calls:
        for i in args:
            entry = plan.entries[i]
            if entry["kind"] == "temp" and i not in outputs:
                storages[entry["storage"]] = max(storages.get(entry["storage"], 1),
                                                 _nbytes(entry))

    def pointer(i: int) -> str:
        entry = plan.entries[i]
        if entry["kind"] == "input":
            return f"inputs[{entry['index']}]"
        if entry["kind"] == "param":
            return f"tt_params[{params[entry['name']]}]"
        if i in outputs:
            return f"outputs[{outputs[i]}]"
        return f"(void*)tt_storage{entry['storage']}"

    n_params = len(plan.params)
    # the headers come first, outside the hidden region (the C library's names stay
    # default-visibility); the kernels' own includes are then no-ops
    headers = dict.fromkeys(["#include <stdint.h>", "#include <string.h>",
                             *(h for s in sources for h in _INCLUDE.findall(s))])
    lines = [f"/* tensortune AOT model: {len(sources)} kernels, {len(calls)} calls.",
             "   int tt_set_params(void** params);    the weights, once (kept alive by the caller)",
             "   int tt_run(void** inputs, void** outputs);    0, -1: no parameters set, k + 1: "
             "call k could not allocate",
             "   int tt_call(void* input0, ..., void* output0, ...);    tt_run, pointers as "
             "arguments",
             "   int tt_num_inputs(void), tt_num_outputs(void), tt_num_params(void); */",
             *headers, "", "#pragma GCC visibility push(hidden)"]
    lines += [_renamed(s, f"__k{k}") for k, s in enumerate(sources)]
    lines += ["#pragma GCC visibility pop", ""]
    lines += [f"static uint8_t tt_storage{sid}[{size}] "
              f"__attribute__((aligned({buffer_alignment(size)})));"
              for sid, size in sorted(storages.items())]
    lines += [f"static int (*tt_external[{max(n_external, 1)}])(void** args);",
              "int tt_set_external(int k, void* fn) {",
              f"  if (k < 0 || k >= {n_external}) return -1;",
              "  tt_external[k] = (int (*)(void**))fn;", "  return 0;", "}", ""]
    lines += [f"static void* tt_params[{max(n_params, 1)}];",
              f"static int tt_ready = {int(n_params == 0)};", "",
              f"int tt_num_inputs(void) {{ return {len(plan.inputs)}; }}",
              f"int tt_num_outputs(void) {{ return {len(plan.outputs)}; }}",
              f"int tt_num_params(void) {{ return {n_params}; }}", "",
              "int tt_set_params(void** params) {",
              f"  for (int i = 0; i < {n_params}; ++i) tt_params[i] = params[i];",
              "  tt_ready = 1;", "  return 0;", "}", "",
              "int tt_run(void** inputs, void** outputs) {", "  if (!tt_ready) return -1;"]
    for k, (entry, args, name) in enumerate(calls):
        if entry.startswith("tt_ext"):  # an external codegen's region: a call back
            index = int(entry[len("tt_ext"):])
            lines += [f"  {{ void* a[] = {{{', '.join(map(pointer, args))}}};  /* {name} */",
                      f"    if (!tt_external[{index}] || tt_external[{index}](a) != 0) "
                      f"return {k + 1}; }}"]
            continue
        lines.append(f"  if ({entry}({', '.join(map(pointer, args))}) != 0) return {k + 1};"
                     f"  /* {name} */")
    for j, i in enumerate(plan.outputs):
        if outputs.get(i) != j:  # an input, a parameter, or an output already written
            lines.append(f"  memcpy(outputs[{j}], {pointer(i)}, {_nbytes(plan.entries[i])});")
    lines += ["  return 0;", "}", ""]
    ins = [f"void* in{i}" for i in range(len(plan.inputs))]
    outs = [f"void* out{i}" for i in range(len(plan.outputs))]
    lines += [f"int tt_call({', '.join(ins + outs) or 'void'}) {{",
              f"  void* inputs[] = {{{', '.join(f'in{i}' for i in range(len(ins))) or '0'}}};",
              f"  void* outputs[] = {{{', '.join(f'out{i}' for i in range(len(outs))) or '0'}}};",
              "  return tt_run(inputs, outputs);", "}", ""]
    return "\n".join(lines), sum(storages.values())

