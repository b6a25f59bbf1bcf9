// tensortune dashboard: the jobs (GET /v1/jobs), and for the selected job each workload's
// trials (GET /v1/jobs/{id}/trials): every measured candidate a point, failures marked by
// error kind below the plot, the best-so-far as a step line, the final re-measurement of
// the best as a diamond, the baselines the job measured on its device (numpy, torch, the
// target's peak) as dotted lines; GFLOP/s or latency, linear or log scale. The best
// program opens with its steps, loop IR and generated source (GET /v1/best/program). For a
// model's job, first the model's estimated end-to-end latency (weighted sum of its tasks'
// best), and per task its share of the FLOPs and of that estimate. A running job is
// followed over its event stream; otherwise the page polls. The token comes from the
// page's #token=... fragment, else the one typed in (kept in localStorage); ?job=ID selects
// a job.
"use strict";

const CURVE_COLOR = "#1f77b4";
const W = 640, H = 280, PAD = { left: 64, right: 16, top: 12, bottom: 40 };
const params = new URLSearchParams(location.search);
let selected = params.get("job");

const tokenInput = document.getElementById("token");
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token")) localStorage.setItem("tensortune-token", fragment.get("token"));
tokenInput.value = localStorage.getItem("tensortune-token") || "";
tokenInput.addEventListener("change", () => {
  localStorage.setItem("tensortune-token", tokenInput.value.trim());
  refresh();
});
const metricSelect = document.getElementById("metric");
metricSelect.addEventListener("change", () => refresh());

async function api(path) {
  const headers = {};
  const token = tokenInput.value.trim();
  if (token) headers["Authorization"] = "Bearer " + token;
  const response = await fetch(path, { headers });
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).detail; } catch (e) { /* not JSON */ }
    throw new Error(`${path}: ${response.status} ${detail}`);
  }
  return response.json();
}

function el(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

function svg(tag, attrs = {}, text = "") {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text) node.textContent = text;
  return node;
}

function renderJobs(jobs) {
  const body = document.getElementById("jobs");
  const focused = body.contains(document.activeElement) ? document.activeElement.dataset.id : null;
  body.replaceChildren();
  for (const job of jobs) {
    const row = el("tr", { class: "job" + (job.id === selected ? " selected" : ""),
                           tabindex: "0", "aria-selected": String(job.id === selected) });
    row.dataset.id = job.id;
    row.append(el("td", {}, job.id.slice(0, 8)),
               el("td", { class: "status-" + job.status }, job.status),
               el("td", {}, `${job.trials}/${job.trial_budget}`),
               el("td", {}, job.owner || ""),
               el("td", {}, new Date(job.created_at * 1000).toLocaleTimeString()));
    const choose = () => {
      selected = job.id;
      history.replaceState(null, "", "?job=" + job.id + location.hash);
      refresh();
    };
    row.addEventListener("click", choose);
    row.addEventListener("keydown", event => {  // keyboard: Enter or Space selects
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); choose(); }
    });
    body.append(row);
    if (job.id === focused) row.focus();  // redrawing keeps the keyboard's place
  }
}

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { hi = lo + 1; }
  const step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
  const mult = [1, 2, 5, 10].find(m => (hi - lo) / (step * m) <= n) || 10;
  const s = step * mult, ticks = [];
  for (let t = Math.ceil(lo / s) * s; t <= hi + 1e-12; t += s) ticks.push(t);
  return ticks;
}

// The model of a model job as a pseudo-task: its estimate curve, its FLOPs per inference.
function modelTask(job) {
  const flops = job.tasks.reduce((sum, t) => sum + t.flops * t.weight, 0);
  const latency = job.estimated_latency_s;
  return {
    name: `model ${job.model.name}: estimated latency (${job.tasks.length} tasks, ` +
          "weight x best, summed)",
    state: job.status, trials: job.trials, workload_key: "model", flops,
    curve: job.estimate_curve, best_latency_s: latency,
    best_gflops: latency ? flops / latency / 1e9 : null,
  };
}

const ERROR_COLORS = {
  compile_error: "#d62728", runtime_error: "#9467bd", run_timeout: "#ff7f0e",
  wrong_answer: "#8c564b", invalid_schedule: "#e377c2", device_lost: "#7f7f7f",
};
const TRIAL_COLOR = "#9ecae1", RECONFIRM_COLOR = "#2ca02c", COMPARE_COLOR = "#ff7f0e";
const BASELINE_COLORS = { numpy: "#17becf", torch: "#c0392b", peak: "#2a7d2a" };

// The task's measured baselines ([name, latency in s]), the peak last.
function baselinesOf(task) {
  return Object.entries(task.baselines || {})
    .filter(([, b]) => b.latency_s !== null && b.latency_s > 0)
    .map(([name, b]) => [name, b.latency_s])
    .sort(([a], [b]) => (a === "peak") - (b === "peak"));
}

// "2.41x numpy · 48% of peak": the best against each baseline; on a simulated device
// (vta), "simulated: 541,233 cycles · GEMM core 83.4% busy".
function versusBaselines(task) {
  if (task.best_latency_s === null) return "";
  const parts = baselinesOf(task).map(([name, latency]) => (name === "peak"
    ? `${Math.round(100 * latency / task.best_latency_s)}% of peak`
    : `${(latency / task.best_latency_s).toFixed(2)}x ${name}`));
  const facts = task.best_facts || {};
  if (facts.cycles) {
    parts.push(`simulated: ${facts.cycles.toLocaleString("en")} cycles`);
    if (facts.mac_utilization !== undefined) {
      parts.push(`GEMM core ${(100 * facts.mac_utilization).toFixed(1)}% busy`);
    }
  }
  return parts.join(" · ");
}

function metricOf(task, latency, metric) {
  return metric === "gflops" ? (task.flops || 0) / latency / 1e9 : latency * 1e3;
}

// Best-so-far after each measured trial (re-measurements of the best are not trials).
function bestSoFar(task, trials, metric) {
  const points = [];
  let best = Infinity;
  for (const t of trials) {
    if (t.reconfirm || t.latency_s === null || !(t.latency_s > 0)) continue;
    if (t.latency_s < best) {
      best = t.latency_s;
      points.push([t.n, metricOf(task, best, metric)]);
    }
  }
  return points;
}

function chart(task, metric, trials, logScale, other = null) {
  const box = el("div", { class: "chart" });
  const best = metric === "gflops"
    ? (task.best_gflops !== null ? task.best_gflops.toFixed(2) + " GFLOP/s" : "-")
    : (task.best_latency_s !== null ? (task.best_latency_s * 1e3).toFixed(4) + " ms" : "-");
  const versus = versusBaselines(task);
  box.append(el("h3", {}, `${task.title || task.name}  —  ${task.state}, ${task.trials} ` +
                          `trials, best ${best}${task.confirmed ? " (confirmed)" : ""}` +
                          (versus ? ` · ${versus}` : "")));
  const valid = trials ? trials.filter(t => t.latency_s !== null && t.latency_s > 0) : [];
  const failed = trials ? trials.filter(t => t.error_kind !== "none") : [];
  const curve = trials ? bestSoFar(task, trials, metric) : task.curve
    .filter(([, latency]) => latency !== null && isFinite(latency) && latency > 0)
    .map(([n, latency]) => [n, metricOf(task, latency, metric)]);
  const otherCurve = other ? bestSoFar(task, other.trials, metric) : [];
  const baselines = baselinesOf(task).map(([name, latency]) => [name, metricOf(task, latency, metric)]);
  const values = [...curve.map(p => p[1]), ...otherCurve.map(p => p[1]),
                  ...valid.map(t => metricOf(task, t.latency_s, metric)),
                  ...baselines.map(b => b[1])];
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
                            "aria-label": `${task.title || task.name}: ${metric} by trial, ` +
                                          `best ${best}${versus ? ", " + versus : ""}`,
                            "data-workload-key": task.workload_key, class: "curve-chart" });
  root.append(svg("rect", { x: 0, y: 0, width: W, height: H, fill: "#ffffff" }));
  const xMax = Math.max(1, ...curve.map(p => p[0]), ...(trials || []).map(t => t.n),
                        ...(other ? other.trials.map(t => t.n) : []));
  const log = logScale && values.length > 0;
  const f = v => (log ? Math.log10(v) : v);
  const fs = values.map(f);
  let yLo = fs.length ? Math.min(...fs) : 0, yHi = fs.length ? Math.max(...fs) : 1;
  const margin = (yHi - yLo) * 0.05 || Math.abs(yHi) * 0.05 || 1;
  yLo -= margin; yHi += margin;
  const plotBottom = H - PAD.bottom - (failed.length ? 14 : 0);  // a band below for failures
  const x = t => PAD.left + (t / xMax) * (W - PAD.left - PAD.right);
  const y = v => plotBottom - ((f(v) - yLo) / ((yHi - yLo) || 1)) * (plotBottom - PAD.top);
  for (const t of niceTicks(0, xMax, 8)) {
    root.append(svg("line", { x1: x(t), x2: x(t), y1: PAD.top, y2: H - PAD.bottom, stroke: "#eee" }));
    root.append(svg("text", { x: x(t), y: H - PAD.bottom + 16, "text-anchor": "middle",
                              "font-size": 11, fill: "#555" }, String(t)));
  }
  for (const tick of niceTicks(yLo, yHi, 5)) {
    const v = log ? Math.pow(10, tick) : tick;
    root.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), stroke: "#eee" }));
    root.append(svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end",
                              "font-size": 11, fill: "#555" }, Number(v.toPrecision(3)).toString()));
  }
  root.append(svg("text", { x: (W + PAD.left) / 2, y: H - 6, "text-anchor": "middle",
                            "font-size": 12, fill: "#333" }, "trials"));
  const unit = metric === "gflops" ? "GFLOP/s" : "latency (ms)";
  root.append(svg("text", { x: 14, y: H / 2, "font-size": 12, fill: "#333",
                            transform: `rotate(-90 14 ${H / 2})`, "text-anchor": "middle" },
                  (trials ? unit : "best " + unit) + (log ? ", log scale" : "")));
  for (const t of valid.filter(t => !t.reconfirm)) {
    const v = metricOf(task, t.latency_s, metric);
    const dot = svg("circle", { cx: x(t.n), cy: y(v), r: 2.5, fill: TRIAL_COLOR, class: "trial",
                                "data-n": t.n });
    dot.append(svg("title", {}, `trial ${t.n}: ${(t.latency_s * 1e3).toPrecision(4)} ms` +
                                (t.disturbed ? " (disturbed)" : "")));
    root.append(dot);
  }
  for (const t of failed) {
    const cx = x(t.n), cy = H - PAD.bottom - 6;
    const mark = svg("path", { d: `M${cx - 3},${cy - 3}L${cx + 3},${cy + 3}M${cx - 3},${cy + 3}` +
                                  `L${cx + 3},${cy - 3}`, stroke: ERROR_COLORS[t.error_kind] || "#d62728",
                               "stroke-width": 2, class: "trial-error",
                               "data-error-kind": t.error_kind });
    mark.append(svg("title", {}, `trial ${t.n}: ${t.error_kind} ${t.error}`));
    root.append(mark);
  }
  // best-so-far is a step function: hold each value until the next improvement
  const steps = points => {
    const path = [];
    points.forEach(([n, v], i) => {
      if (i > 0) path.push(`${x(n)},${y(points[i - 1][1])}`);
      path.push(`${x(n)},${y(v)}`);
    });
    path.push(`${x(xMax)},${y(points[points.length - 1][1])}`);
    return path.join(" ");
  };
  if (otherCurve.length) {
    root.append(svg("polyline", { points: steps(otherCurve), fill: "none", stroke: COMPARE_COLOR,
                                  "stroke-width": 2.5, "stroke-dasharray": "6 4",
                                  class: "curve-compare" }));
  }
  if (curve.length) {
    root.append(svg("polyline", { points: steps(curve), fill: "none", stroke: CURVE_COLOR,
                                  "stroke-width": 3, class: "curve" }));
  } else {
    root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#999" },
                    "no valid measurement yet"));
  }
  // what the device measured before tuning, drawn over the curve: a baseline the best
  // matches would otherwise vanish under it
  for (const [name, v] of baselines) {
    const color = BASELINE_COLORS[name] || "#555";
    const line = svg("g", { class: "baseline", "data-baseline": name });
    // on a pixel row's centre: off it, antialiasing blends a thin line into two paler rows
    const yRow = Math.round(y(v) - 0.5) + 0.5;
    line.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: yRow, y2: yRow, stroke: color,
                              "stroke-width": 1.5, "stroke-dasharray": "2 3" }),
                svg("text", { x: W - PAD.right - 4, y: y(v) - 4, "text-anchor": "end",
                              "font-size": 11, fill: color },
                    `${name} ${Number(v.toPrecision(3))}${metric === "gflops" ? " GFLOP/s" : " ms"}`),
                svg("title", {}, name === "peak"
                  ? "the target's float32 multiply-add peak, measured on the device"
                  : `${name} on the same device, before tuning`));
    root.append(line);
  }
  for (const t of valid.filter(t => t.reconfirm)) {
    const cx = x(t.n) + 6, cy = y(metricOf(task, t.latency_s, metric));
    const diamond = svg("path", { d: `M${cx},${cy - 6}L${cx + 6},${cy}L${cx},${cy + 6}L${cx - 6},${cy}Z`,
                                  fill: "none", stroke: RECONFIRM_COLOR, "stroke-width": 2,
                                  class: "reconfirm" });
    diamond.append(svg("title", {}, `re-measured best: ${(t.latency_s * 1e3).toPrecision(4)} ms`));
    root.append(diamond);
  }
  box.append(root);
  if (other) {
    const legend = el("p", { class: "compare-legend" });
    legend.append(el("span", { style: `color:${CURVE_COLOR}` }, "━ this job   "),
                  el("span", { style: `color:${COMPARE_COLOR}` }, `╍ ${other.label}` +
                     (otherCurve.length ? "" : " (no valid measurement of this workload)")));
    box.append(legend);
  }
  if (failed.length) {
    const counts = {};
    for (const t of failed) counts[t.error_kind] = (counts[t.error_kind] || 0) + 1;
    const legend = el("p", { class: "errors" }, "failed: ");
    for (const [kind, n] of Object.entries(counts)) {
      legend.append(el("span", { style: `color:${ERROR_COLORS[kind] || "#d62728"}`,
                                 "data-error-kind": kind }, `✕ ${kind} ${n}  `));
    }
    box.append(legend);
  }
  return box;
}

// The job's spec in a line: what a user chose (or left at the defaults).
function specLine(spec) {
  if (!spec) return "";
  const parts = [`${spec.trials} trials in batches of ${spec.batch_size}`,
                 `cost model ${spec.cost_model}`, `policy ${spec.policy}`,
                 `scheduler ${spec.scheduler}`];
  if (spec.time_budget_s) parts.push(`time budget ${spec.time_budget_s} s`);
  if (spec.early_stop) parts.push(`early stop after ${spec.early_stop} trials without gain`);
  return parts.join(" · ");
}

function timeSplit(seconds) {
  if (!seconds || !seconds.total) return null;
  const part = name => `${name} ${seconds[name].toFixed(1)} s`;
  return el("p", { class: "time-split" },
            `time ${seconds.total.toFixed(1)} s: ${part("search")}, ${part("measure")} ` +
            `(build ${seconds.build.toFixed(1)} s, run ${seconds.run.toFixed(1)} s summed over ` +
            `workers), ${part("database")}`);
}

// Per task: weight, trials the scheduler gave it, state, best (against the baselines),
// failures; with several tasks (a model's), each one's share of the FLOPs and of the
// estimated latency (weight x best over the sum).
function taskTable(job) {
  const table = el("table", { class: "tasks" });
  table.append(el("caption", { class: "visually-hidden" }, "tasks of the job"));
  const head = el("tr");
  const several = job.tasks.length > 1;
  const totalFlops = job.tasks.reduce((sum, t) => sum + t.flops * t.weight, 0);
  const estimate = job.estimated_latency_s;
  for (const name of ["workload", "weight", ...(several ? ["FLOPs share"] : []), "trials",
                      "state", "best", "against", ...(several ? ["share of estimate"] : []),
                      "failed", "expected gain of a round"]) {
    head.append(el("th", { scope: "col" }, name));
  }
  const [thead, tbody] = [el("thead"), el("tbody")];
  table.append(thead, tbody);
  thead.append(head);
  for (const task of job.tasks) {
    const failed = Object.entries(task.errors).map(([k, n]) => `${k} ${n}`).join(", ");
    const best = task.best_latency_s === null ? "-"
      : `${(task.best_latency_s * 1e3).toPrecision(4)} ms` +
        (task.best_gflops ? `, ${task.best_gflops.toFixed(1)} GFLOP/s` : "");
    const row = el("tr", { "data-task-key": task.workload_key });
    const gain = task.expected_gain_s === null || task.expected_gain_s === undefined ? "-"
      : `${(task.expected_gain_s * 1e3).toPrecision(3)} ms`;
    const share = (part, whole) => (whole > 0 ? `${(100 * part / whole).toFixed(1)}%` : "-");
    const weighted = task.best_latency_s === null ? "-"
      : `${(task.weight * task.best_latency_s * 1e3).toPrecision(3)} ms` +
        (estimate ? ` (${share(task.weight * task.best_latency_s, estimate)})` : "");
    row.append(el("td", {}, task.title || task.name), el("td", {}, String(task.weight)),
               ...(several ? [el("td", { class: "flops-share" },
                                  share(task.flops * task.weight, totalFlops))] : []),
               el("td", {}, String(task.trials)), el("td", {}, task.state),
               el("td", {}, best), el("td", { class: "versus" }, versusBaselines(task) || "-"),
               ...(several ? [el("td", { class: "estimate-share" }, weighted)] : []),
               el("td", {}, failed || "none"),
               el("td", { title: task.chosen_because ? "last round: " + task.chosen_because : "" },
                  gain));
    tbody.append(row);
  }
  return table;
}

// One example message per error kind, from the job's trials.
function errorExamples(trials) {
  const seen = {};
  for (const task of trials ? trials.tasks : []) {
    for (const t of task.trials) {
      if (t.error_kind !== "none" && !(t.error_kind in seen)) seen[t.error_kind] = t.error;
    }
  }
  const kinds = Object.keys(seen);
  if (!kinds.length) return null;
  const list = el("ul", { class: "error-examples" });
  for (const kind of kinds) {
    const item = el("li", { "data-error-kind": kind });
    item.append(el("strong", {}, kind + ": "), el("span", {}, seen[kind]));
    list.append(item);
  }
  return list;
}

// A schedule step as one readable line: ["split", "T", "i", 16] -> "split T i 16".
function stepLine(step) {
  return step.map(part => (Array.isArray(part) ? `[${part.join(", ")}]` : String(part))).join(" ");
}

function shellQuote(text) {
  return /^[A-Za-z0-9_.,=:\/-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`;
}

// The command that prints this best program (and its generated C) from the database.
function bestCommand(task, target) {
  const workload = task.workload || {};
  if (!workload.op) return null;  // a computation (DAG) workload has no CLI form
  const params = Object.entries(workload.params || {})
    .map(([k, v]) => `-p ${shellQuote(`${k}=${Array.isArray(v) ? v.join(",") : v}`)}`);
  return ["tensortune best --op", workload.op, ...params, "--target", shellQuote(target),
          "--source"].join(" ");
}

// The best program of a task, asked of GET /v1/best when the section is opened.
function bestProgram(task, job) {
  const box = el("details", { class: "best-program", "data-task-key": task.workload_key });
  box.append(el("summary", {}, "best program"));
  if (params.get("best") === task.workload_key) setTimeout(() => { box.open = true; });
  box.addEventListener("toggle", async () => {
    if (!box.open || box.dataset.loaded) return;
    box.dataset.loaded = "1";
    try {
      const query = `workload_key=${encodeURIComponent(task.workload_key)}` +
                    `&target=${encodeURIComponent(job.target)}`;
      const [best] = (await api("/v1/best?" + query)).results;
      const gflops = best.gflops ? `, ${best.gflops.toFixed(1)} GFLOP/s` : "";
      box.append(el("p", {}, `${(best.latency_s * 1e3).toPrecision(4)} ms${gflops}, measured ` +
                             `${new Date(best.measured_at * 1000).toLocaleString()} on ` +
                             `${best.device_model} with ${best.toolchain} (job ` +
                             `${(best.job_id || "-").slice(0, 8)})`));
      box.append(el("pre", { class: "steps" }, best.steps.map(stepLine).join("\n")));
      const program = await api("/v1/best/program?" + query);
      for (const [name, label] of [["loop_ir", "loop IR"], ["source", "generated source"]]) {
        const part = el("details", { class: name.replace("_", "-") });
        part.append(el("summary", {}, label), el("pre", {}, program[name]));
        box.append(part);
      }
    } catch (err) {
      box.append(el("p", { class: "status-failed" }, err.message));
    }
    const command = bestCommand(task, job.target);
    if (command) {
      const line = el("p", {}, "reproduce: ");
      const code = el("code", { class: "command" }, command);
      const copy = el("button", { type: "button" }, "copy");
      copy.addEventListener("click", () => navigator.clipboard.writeText(command));
      line.append(code, " ", copy);
      box.append(line);
    }
  });
  return box;
}

function renderJob(job, trials, compared = null) {
  document.getElementById("job-title").textContent = `Job ${job.id}`;
  const summary = document.getElementById("job-summary");
  summary.replaceChildren(
    el("p", {}, `${job.status} · ${job.trials}/${job.trial_budget} trials · target `),
  );
  summary.firstChild.append(el("code", {}, job.target));
  if (job.error) summary.append(el("p", { class: "status-failed" }, job.error));
  summary.append(el("p", { class: "spec" }, specLine(job.spec)));
  const split = timeSplit(job.seconds);
  if (split) summary.append(split);
  const tableBox = el("div", { class: "table-scroll" });
  tableBox.append(taskTable(job));
  summary.append(tableBox);
  if (job.tasks.length > 1 && job.spec && job.spec.scheduler === "gradient") {
    summary.append(el("p", { class: "scheduler-note" },
      "How trials were shared: every task gets a first round; then each round goes to the " +
      "task whose next round is expected to cut the weighted latency sum most (its weight " +
      "times its recent improvement per round: the last column), and 5% of rounds to a " +
      "random task. Hover a task's gain for why it got its last round."));
  }
  const examples = errorExamples(trials);
  if (examples) summary.append(el("p", {}, "failures, an example of each kind:"), examples);
  const charts = document.getElementById("charts");
  const byKey = Object.fromEntries((trials ? trials.tasks : []).map(t => [t.workload_key, t.trials]));
  const log = logInput.checked;
  const drawn = job.tasks.map(task => {
    const other = compared && compared.byKey[task.workload_key]
      ? { label: compared.label, trials: compared.byKey[task.workload_key] } : null;
    const box = chart(task, metricSelect.value, byKey[task.workload_key] || [], log, other);
    const previous = document.querySelector(`details.best-program[data-task-key="${task.workload_key}"]`);
    if (task.best_latency_s !== null) {
      // keep an opened section open (and its contents) across redraws
      box.append(previous && previous.open ? previous : bestProgram(task, job));
    }
    return box;
  });
  charts.replaceChildren(...(job.model ? [chart(modelTask(job), metricSelect.value, null, log)] : []),
                         ...drawn);
  document.body.dataset.jobStatus = job.status;
}

// The job to compare with (?compare=ID, or the header's choice): its trials per workload.
let compareWith = params.get("compare");
const compareSelect = document.getElementById("compare");
compareSelect.addEventListener("change", () => {
  compareWith = compareSelect.value || null;
  const query = new URLSearchParams(location.search);
  if (compareWith) query.set("compare", compareWith); else query.delete("compare");
  history.replaceState(null, "", "?" + query.toString() + location.hash);
  refresh();
});

// A job and its trials. A finished job's trials do not change (until it is resumed, which
// gives it a new finish time), so the page fetches them once, not at every poll.
const FINISHED = new Set(["succeeded", "failed", "cancelled"]);
const finishedTrials = new Map();
async function jobWithTrials(jobId) {
  const id = encodeURIComponent(jobId);
  const job = await api("/v1/jobs/" + id);
  const key = `${job.id}@${job.finished_at}`;
  let trials = FINISHED.has(job.status) ? finishedTrials.get(key) : undefined;
  if (!trials) {
    trials = await api(`/v1/jobs/${id}/trials`);
    if (FINISHED.has(job.status) && trials.status === job.status) finishedTrials.set(key, trials);
  }
  return [job, trials];
}

async function compared() {
  const [job, trials] = await jobWithTrials(compareWith);
  const spec = job.spec || {};
  return {
    label: `job ${job.id.slice(0, 8)} (${spec.cost_model || "?"} cost model, ${spec.policy || "?"} ` +
           `policy, ${job.target})`,
    byKey: Object.fromEntries(trials.tasks.map(t => [t.workload_key, t.trials])),
  };
}

function renderCompareChoices(jobs) {
  if (document.activeElement === compareSelect) return;  // not while someone is choosing
  const options = [el("option", { value: "" }, "none")];
  for (const job of jobs) {
    if (job.id === selected) continue;
    const attrs = job.id === compareWith ? { value: job.id, selected: "" } : { value: job.id };
    options.push(el("option", attrs, `${job.id.slice(0, 8)} ${job.status}`));
  }
  compareSelect.replaceChildren(...options);
}

async function refresh() {
  const message = document.getElementById("message");
  try {
    const jobs = (await api("/v1/jobs?limit=50")).jobs;
    renderJobs(jobs);
    renderCompareChoices(jobs);
    if (selected) {
      const [job, trials] = await jobWithTrials(selected);
      renderJob(job, trials, compareWith && compareWith !== selected ? await compared() : null);
      follow(job);
    }
    message.textContent = "";
    document.body.dataset.ready = "1";
  } catch (err) {
    message.textContent = err.message;
  }
}

// Live updates: the selected job's event stream (fetch, so that the token goes in a
// header, not the URL); every event redraws. Without a stream (it dropped, or the job is
// not running), the page polls.
let following = null;
async function follow(job) {
  if (job.status !== "queued" && job.status !== "running") return;
  if (following === job.id) return;
  following = job.id;
  document.body.dataset.live = "stream";
  try {
    const headers = { Accept: "text/event-stream" };
    const token = tokenInput.value.trim();
    if (token) headers["Authorization"] = "Bearer " + token;
    const response = await fetch(job.events_url, { headers });
    if (!response.ok || !response.body) throw new Error(String(response.status));
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const events = buffer.split("\n\n");
      buffer = events.pop();
      if (events.some(e => e.includes("data:")) && selected === job.id) refresh();
    }
  } catch (err) {
    /* fall back to polling below */
  } finally {
    if (following === job.id) following = null;
    document.body.dataset.live = "poll";
  }
}

const logInput = document.getElementById("log-scale");
logInput.addEventListener("change", () => refresh());
refresh();
setInterval(() => { if (following === null) refresh(); }, 1500);
setInterval(() => { if (following !== null) refresh(); }, 10000);  // the job list
