// tensortune dashboard: polls GET /v1/jobs and GET /v1/jobs/{id} and draws each workload's
// best-so-far curve (GFLOP/s or latency against trials) as an inline SVG; for a model's
// job, first the model's estimated end-to-end latency (weighted sum of its tasks' best).
// The token comes from the page's #token=... fragment, else the one typed in (kept in
// localStorage); ?job=ID selects a job.
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
  body.replaceChildren();
  for (const job of jobs) {
    const row = el("tr", { class: "job" + (job.id === selected ? " selected" : "") });
    row.dataset.id = job.id;
    row.append(el("td", {}, job.id.slice(0, 8)),
               el("td", { class: "status-" + job.status }, job.status),
               el("td", {}, `${job.trials}/${job.trial_budget}`),
               el("td", {}, job.owner || ""),
               el("td", {}, new Date(job.created_at * 1000).toLocaleTimeString()));
    row.addEventListener("click", () => {
      selected = job.id;
      history.replaceState(null, "", "?job=" + job.id + location.hash);
      refresh();
    });
    body.append(row);
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

function chart(task, metric) {
  const points = task.curve
    .filter(([, latency]) => latency !== null && isFinite(latency) && latency > 0)
    .map(([trials, latency]) => [trials, metric === "gflops"
      ? (task.flops || 0) / latency / 1e9 : latency * 1e3]);
  const box = el("div", { class: "chart" });
  const best = metric === "gflops"
    ? (task.best_gflops !== null ? task.best_gflops.toFixed(2) + " GFLOP/s" : "-")
    : (task.best_latency_s !== null ? (task.best_latency_s * 1e3).toFixed(4) + " ms" : "-");
  box.append(el("h3", {}, `${task.name}  —  ${task.state}, ${task.trials} trials, best ${best}`));
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`,
                            "data-workload-key": task.workload_key, class: "curve-chart" });
  root.append(svg("rect", { x: 0, y: 0, width: W, height: H, fill: "#ffffff" }));
  const xMax = Math.max(1, ...points.map(p => p[0]));
  const ys = points.map(p => p[1]);
  const yLo = ys.length ? Math.min(...ys) * 0.95 : 0, yHi = ys.length ? Math.max(...ys) * 1.05 : 1;
  const x = t => PAD.left + (t / xMax) * (W - PAD.left - PAD.right);
  const y = v => H - PAD.bottom - ((v - yLo) / ((yHi - yLo) || 1)) * (H - PAD.top - PAD.bottom);
  for (const t of niceTicks(0, xMax, 8)) {
    root.append(svg("line", { x1: x(t), x2: x(t), y1: PAD.top, y2: H - PAD.bottom, stroke: "#eee" }));
    root.append(svg("text", { x: x(t), y: H - PAD.bottom + 16, "text-anchor": "middle",
                              "font-size": 11, fill: "#555" }, String(t)));
  }
  for (const v of niceTicks(yLo, yHi, 5)) {
    root.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), stroke: "#eee" }));
    root.append(svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end",
                              "font-size": 11, fill: "#555" }, Number(v.toPrecision(4)).toString()));
  }
  root.append(svg("text", { x: (W + PAD.left) / 2, y: H - 6, "text-anchor": "middle",
                            "font-size": 12, fill: "#333" }, "trials"));
  root.append(svg("text", { x: 14, y: H / 2, "font-size": 12, fill: "#333",
                            transform: `rotate(-90 14 ${H / 2})`, "text-anchor": "middle" },
                  metric === "gflops" ? "best GFLOP/s" : "best latency (ms)"));
  if (points.length) {
    // best-so-far is a step function: hold each value until the next improvement
    const path = [];
    points.forEach(([t, v], i) => {
      if (i > 0) path.push(`${x(t)},${y(points[i - 1][1])}`);
      path.push(`${x(t)},${y(v)}`);
    });
    root.append(svg("polyline", { points: path.join(" "), fill: "none", stroke: CURVE_COLOR,
                                  "stroke-width": 3, class: "curve" }));
    for (const [t, v] of points) {
      root.append(svg("circle", { cx: x(t), cy: y(v), r: 3.5, fill: CURVE_COLOR }));
    }
  } else {
    root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#999" },
                    "no valid measurement yet"));
  }
  box.append(root);
  return box;
}

function renderJob(job) {
  document.getElementById("job-title").textContent = `Job ${job.id}`;
  const summary = document.getElementById("job-summary");
  summary.replaceChildren(
    el("p", {}, `${job.status} · ${job.trials}/${job.trial_budget} trials · target `),
  );
  summary.firstChild.append(el("code", {}, job.target));
  if (job.error) summary.append(el("p", { class: "status-failed" }, job.error));
  const charts = document.getElementById("charts");
  const tasks = job.model ? [modelTask(job), ...job.tasks] : job.tasks;
  charts.replaceChildren(...tasks.map(task => chart(task, metricSelect.value)));
  document.body.dataset.jobStatus = job.status;
}

async function refresh() {
  const message = document.getElementById("message");
  try {
    renderJobs((await api("/v1/jobs?limit=50")).jobs);
    if (selected) renderJob(await api("/v1/jobs/" + encodeURIComponent(selected)));
    message.textContent = "";
    document.body.dataset.ready = "1";
  } catch (err) {
    message.textContent = err.message;
  }
}

refresh();
setInterval(refresh, 1500);
