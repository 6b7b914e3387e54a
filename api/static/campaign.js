// The campaign page: convergence plots (uPlot), the decision chain, the selected candidate's
// figures, profile and source diff against its parent (jsdiff + diff2html), live from the events.
"use strict";

const campaignId = decodeURIComponent(location.pathname.split("/").filter(Boolean).pop());
const PLOT_HEIGHT = 320;

const state = {
  campaign: null, page: null, points: [], notes: [], byId: new Map(), selected: null,
  plots: {}, details: new Map(), stream: null, refreshTimer: null,
};

// ---- data ----
async function loadAll() {
  const [campaign, page] = await Promise.all([
    api(`/campaigns/${encodeURIComponent(campaignId)}`),
    apiAll(`/campaigns/${encodeURIComponent(campaignId)}/points`, 5000),
  ]);
  state.campaign = campaign;
  state.page = page;
  Object.assign(STATUS_COLOURS, page.status_colours);
  Object.keys(STATUS_COLOURS).forEach((s) => FINAL.add(s));
  state.points = page.items;
  state.notes = page.notes || [];
  state.byId = new Map(page.items.map((p) => [p.id, p]));
}

function detail(candidateId) {
  if (!state.details.has(candidateId)) {
    const promise = api(`/campaigns/${encodeURIComponent(campaignId)}/candidates/${encodeURIComponent(candidateId)}`);
    promise.catch(() => state.details.delete(candidateId));
    state.details.set(candidateId, promise);
  }
  return state.details.get(candidateId);
}

const FINAL = new Set();  // the final statuses (STATUS_COLOURS' keys, once loaded)

// whether the campaign may still evaluate candidates (its "yet"s)
function running() { return ["queued", "running"].includes(state.campaign.status); }

// ---- header figures ----
function stat(label, value, sub, key) {
  return el("div", { class: "stat", dataset: { stat: key } }, el("div", { class: "label" }, label),
    el("div", { class: "value" }, value), el("div", { class: "sub" }, sub || ""));
}

function renderStats() {
  const c = state.campaign;
  const best = c.best || {};
  const base = c.baseline || {};
  const vendor = state.page.vendor_throughput;
  const peak = state.page.peak;
  const unit = unitOf(c);
  const vendorName = state.page.vendor || "vendor";
  document.title = `tuneforge · ${c.id.slice(0, 8)} · ${familyLabel(c)} ${shapeText(c)}`;
  document.getElementById("title").replaceChildren(`Campaign ${c.id.slice(0, 8)} · `,
    el("span", { style: { fontWeight: 400 }, title: c.kernel }, `${familyLabel(c)} ${shapeText(c)}`));
  document.getElementById("stats").replaceChildren(
    stat("status", statusBadge(c.status, CAMPAIGN_COLOURS), c.status_reason, "status"),
    stat(`best ${unit}`, fmt(best.throughput),
      best.avg_us ? `${fmtUs(best.avg_us)} · iteration ${best.iteration}` : running() ? "no correct kernel yet" : "no correct kernel", "best"),
    stat(`× ${vendorName}`, fmtVendor(c.pct_of_vendor), vendor ? `${vendorName} ${fmt(vendor)} ${unit}` : "no vendor time", "vendor"),
    stat("speedup vs baseline", c.speedup_vs_baseline ? `${fmt(c.speedup_vs_baseline, 1)}×` : "–",
      base.throughput ? `baseline ${fmt(base.throughput)} ${unit}` : "", "speedup"),
    stat("evaluations", `${c.evaluations} / ${c.budget.iterations}`, `${fmt(c.gpu_seconds, 1)} GPU s`, "evaluations"),
    stat(state.page.peak_label || "peak", peak ? `${fmt(peak, 1)}` : "–",
      peak && best.throughput ? `the best runs at ${fmtPct(100 * best.throughput / peak, 0)} of it` : unit, "peak"),
    stat("policy · backend", `${c.policy}`, `${c.backend} · ${c.gpu || "unknown GPU"}`, "policy"));
}

// ---- plots ----
function plotRows(by) {
  const key = by === "iteration" ? "iteration" : "elapsed_s";
  return state.points.filter((p) => FINAL.has(p.status) && p[key] !== null && p[key] !== undefined)
    .sort((a, b) => (a[key] - b[key]) || (a.iteration - b.iteration))
    .map((p) => ({ point: p, x: p[key], y: p.status === "ok" && p.throughput ? p.throughput : 0 }));
}

function plotData(by) {
  const rows = plotRows(by);
  const statuses = Object.keys(STATUS_COLOURS).filter((s) => rows.some((r) => r.point.status === s));
  const xs = rows.map((r) => r.x);
  let best = null;
  const bestLine = rows.map((r) => {
    if (r.point.accepted && r.point.throughput) best = Math.max(best || 0, r.point.throughput);
    return best;
  });
  const series = [{ label: by === "iteration" ? "iteration" : "seconds" },
    { label: "best so far", stroke: "#1971c2", width: 2, paths: uPlot.paths.stepped({ align: 1 }),
      points: { show: false } }];
  const data = [xs, bestLine];
  const vendor = state.page.vendor_throughput;
  const peak = state.page.peak;
  if (vendor) {
    series.push({ label: `${state.page.vendor || "vendor"} ${fmt(vendor, 1)}`, stroke: "#e03131", width: 1.5, dash: [6, 4], points: { show: false } });
    data.push(xs.map(() => vendor));
  }
  if (peak) {
    series.push({ label: `${state.page.peak_label || "peak"} ${fmt(peak, 1)}`, stroke: "#495057", width: 1.5, dash: [2, 4], points: { show: false } });
    data.push(xs.map(() => peak));
  }
  const firstStatus = series.length;
  for (const status of statuses) {
    const colour = STATUS_COLOURS[status];
    const count = rows.filter((r) => r.point.status === status).length;
    series.push({ label: `${status} (${count})`, stroke: colour, fill: colour, width: 0,
      paths: () => null, points: { show: true, size: 7, width: 1, stroke: colour, fill: `${colour}bb` } });
    data.push(rows.map((r) => (r.point.status === status ? r.y : null)));
  }
  return { rows, series, data, firstStatus, signature: series.map((s) => s.label.split(" (")[0]).join("|") };
}

function plotTop(model) {
  return Math.max(...model.rows.map((r) => r.y), state.page.vendor_throughput || 0, state.page.peak || 0);
}

// uPlot draws a series' legend label once, when the plot is made: a live campaign's plot keeps
// its uPlot while the counts in the status labels ("ok (12)") grow
function relabel(u, model) {
  for (const label of u.root.querySelectorAll(".u-legend .u-series .u-label")) {
    const name = label.textContent.split(" (")[0];
    const index = model.series.findIndex((s, i) => i > 0 && s.label.split(" (")[0] === name);
    if (index < 0) continue;
    u.series[index].label = model.series[index].label;
    if (label.textContent !== model.series[index].label) label.textContent = model.series[index].label;
  }
}

function drawOverlay(name) {
  return (u) => {
    const plot = state.plots[name];
    if (!plot) return;
    const { rows, firstStatus } = plot.model;
    // how many candidate points are drawn now (inside the visible x range): the tests read it
    let drawn = 0;
    const { min, max } = u.scales.x;
    for (let s = firstStatus; s < u.data.length; s++) {
      if (!u.series[s].show) continue;
      u.data[s].forEach((v, i) => { if (v !== null && u.data[0][i] >= min && u.data[0][i] <= max) drawn++; });
    }
    plot.container.dataset.drawnPoints = String(drawn);
    plot.container.dataset.points = String(rows.length);
    const index = rows.findIndex((r) => r.point.id === state.selected);
    if (index < 0) return;
    const x = u.valToPos(rows[index].x, "x", true);
    const y = u.valToPos(rows[index].y, "y", true);
    const ctx = u.ctx;
    ctx.save();
    ctx.beginPath();
    ctx.arc(x, y, 9 * devicePixelRatio, 0, 2 * Math.PI);
    ctx.lineWidth = 3 * devicePixelRatio;
    ctx.strokeStyle = "#f59f00";
    ctx.stroke();
    ctx.restore();
  };
}

function nearestRow(name, offsetX, offsetY) {
  const plot = state.plots[name];
  const u = plot.u;
  let best = null;
  let bestD = Infinity;
  plot.model.rows.forEach((r, i) => {
    const s = plot.model.firstStatus + Object.keys(STATUS_COLOURS)
      .filter((st) => plot.model.rows.some((q) => q.point.status === st)).indexOf(r.point.status);
    if (u.series[s] && !u.series[s].show) return;
    const dx = u.valToPos(r.x, "x") - offsetX;
    const dy = u.valToPos(r.y, "y") - offsetY;
    const d = dx * dx + dy * dy;
    if (d < bestD) { bestD = d; best = i; }
  });
  return best !== null && bestD <= 30 * 30 ? plot.model.rows[best].point : null;
}

function buildPlot(name) {
  const container = document.getElementById(`plot-${name}`);
  const model = plotData(name);
  const old = state.plots[name];
  if (old && old.model.signature === model.signature && old.u) {
    old.model = model;
    old.u.setData(model.data);  // rescales y through the range below, which reads old.model
    relabel(old.u, model);
    return;
  }
  if (old && old.u) old.u.destroy();
  container.replaceChildren();
  const plot = { container, model, u: null };
  state.plots[name] = plot;
  if (!model.rows.length) {
    container.append(el("p", { class: "empty" }, running() ? "No evaluated candidate yet."
      : `No candidate was evaluated: the campaign is ${state.campaign.status}.`));
    container.dataset.points = "0";
    container.dataset.drawnPoints = "0";
    return;
  }
  const opts = {
    width: Math.max(320, container.clientWidth), height: PLOT_HEIGHT,
    // a little room below 0, so that failed candidates (drawn at 0) are whole and clickable;
    // the top follows the points of a live campaign (a kernel may pass the peak)
    scales: { x: { time: false }, y: { range: () => {
      const top = plotTop(plot.model);
      return [-(top * 0.04 || 0.04), top * 1.08 || 1];
    } } },
    axes: [{ label: name === "iteration" ? "iteration" : "seconds since the campaign started" },
      { label: state.page.unit || "TFLOP/s" }],
    series: model.series,
    cursor: { drag: { x: true, y: false, setScale: true }, points: { show: false } },
    legend: { live: false },
    hooks: { draw: [drawOverlay(name)] },
  };
  plot.u = new uPlot(opts, model.data, container);
  let down = null;
  plot.u.over.addEventListener("mousedown", (e) => { down = [e.offsetX, e.offsetY]; });
  plot.u.over.addEventListener("click", (e) => {
    if (down && Math.hypot(e.offsetX - down[0], e.offsetY - down[1]) > 4) return;  // a zoom drag
    const point = nearestRow(name, e.offsetX, e.offsetY);
    if (point) select(point.id);
  });
  plot.u.over.style.cursor = "pointer";
  new ResizeObserver(() => {
    const width = Math.max(320, container.clientWidth);
    if (plot.u && Math.abs(plot.u.width - width) > 2) plot.u.setSize({ width, height: PLOT_HEIGHT });
  }).observe(container);
}

function redrawPlots() { for (const plot of Object.values(state.plots)) if (plot.u) plot.u.redraw(false, false); }

// ---- decision chain ----
// a failed candidate: its recorded status (the badge) and one line saying why; the whole
// recorded error is in the candidate's panel, behind a click
function failed(p) { return FINAL.has(p.status) && p.status !== "ok"; }

function chainRow(p) {
  const d = p.decision || {};
  const decided = FINAL.has(p.status);
  const why = failed(p) ? el("div", { class: "failure", title: "click for the recorded error" }, p.failure || "")
    : el("div", {}, decided ? (d.reason || "") : "");
  return el("tr", { class: `clickable${p.id === state.selected ? " selected" : ""}`, dataset: { id: p.id, iteration: p.iteration },
    onclick: () => select(p.id) },
  el("td", { class: "num" }, p.iteration),
  el("td", { class: "why" }, el("code", {}, p.action || "baseline"), " ",
    el("span", { class: "muted" }, `· ${p.proposed_by || ""}`), el("div", {}, p.reason || "")),
  el("td", { class: "why" }, statusBadge(p.status), " ",
    p.throughput ? el("b", {}, `${fmt(p.throughput)} ${state.page.unit || ""} `) : "",
    decided ? el("span", { class: p.accepted ? "acc" : "rej" }, p.accepted ? "✓ accepted" : "✗ reverted")
      : el("span", { class: "muted" }, "in flight"),
    why));
}

// the whole recorded error of a failed candidate, folded under its one-line reason
function errorDetail(c) {
  const text = c.error || (c.feedback || {}).error || ((c.feedback || {}).correctness || {}).reason;
  if (!text) return null;
  return el("details", { class: "error-detail", id: "error-detail" },
    el("summary", {}, "the recorded error"), el("pre", { class: "source" }, text));
}

// what the agent said that no candidate shows (an injected action it dropped): a row of its own
function noteRow(n) {
  return el("tr", { class: "note", dataset: { note: n.kind || "note", after: n.after_iteration ?? "" } },
    el("td", { class: "num" }, "–"),
    el("td", { class: "why", colspan: 2 }, el("span", { class: "muted" }, `note${n.kind ? ` · ${n.kind}` : ""} `), n.message));
}

function renderChain() {
  const acceptedOnly = document.getElementById("accepted-only").checked;
  const rows = state.points.filter((p) => !acceptedOnly || p.accepted).sort((a, b) => a.iteration - b.iteration);
  // each note after the last shown candidate that existed when it was said
  const notes = state.notes.map((n) => ({ n, at: n.after_iteration ?? -1 }));
  const body = [];
  for (const { n } of notes.filter(({ at }) => !rows.length || at < rows[0].iteration)) body.push(noteRow(n));
  rows.forEach((p, i) => {
    body.push(chainRow(p));
    const next = i + 1 < rows.length ? rows[i + 1].iteration : Infinity;
    for (const { n } of notes.filter(({ at }) => at >= p.iteration && at < next)) body.push(noteRow(n));
  });
  document.querySelector("#chain tbody").replaceChildren(...body);
  const accepted = state.points.filter((p) => p.accepted).length;
  const said = state.notes.length ? ` · ${state.notes.length} note${state.notes.length === 1 ? "" : "s"}` : "";
  document.getElementById("chain-count").textContent = `${state.points.length} candidates · ${accepted} accepted${said}`;
}

// ---- the selected candidate ----
const PROFILE_FIGURES = [
  ["sm_occupancy_pct", "achieved occupancy", "%"], ["theoretical_occupancy_pct", "theoretical occupancy", "%"],
  ["memory_throughput_pct", "memory throughput", "% of peak"], ["sm_busy_pct", "SM busy", "%"],
  ["shared_mem_bank_conflicts", "shared-memory bank conflicts", ""], ["regs_per_thread", "registers / thread", ""],
  ["max_dynamic_smem_bytes", "dynamic shared memory", "bytes"], ["spill_bytes", "spill", "bytes"],
  ["limiter", "occupancy limited by", ""],
];

function profileTable(profile) {
  if (!profile) return el("p", { class: "muted", id: "profile" }, "No profile: the candidate was not measured.");
  const sources = profile.sources || {};
  const missing = profile.missing || {};
  const known = new Set(PROFILE_FIGURES.map((f) => f[0]));
  const figures = [...PROFILE_FIGURES, ...Object.keys(profile)
    .filter((k) => !known.has(k) && k !== "sources" && k !== "missing").map((k) => [k, k, ""])];
  const rows = figures.filter(([key]) => key in profile || key in missing || key in sources).map(([key, label, unit]) => {
    const value = profile[key];
    const isNull = value === null || value === undefined;
    const source = isNull ? (missing[key] ? `null: ${missing[key]}` : "null: no reason given")
      : (sources[key] || (key === "limiter" ? sources.theoretical_occupancy_pct || "" : ""));
    return el("tr", { class: `figure${isNull ? " null" : ""}`, dataset: { figure: key } },
      el("td", {}, label), el("td", { class: "num value" }, isNull ? "null" : `${typeof value === "number" ? value.toLocaleString() : value}${unit ? ` ${unit}` : ""}`),
      el("td", { class: "source" }, source));
  });
  return el("table", { class: "data profile", id: "profile" },
    el("thead", {}, el("tr", {}, el("th", {}, "figure"), el("th", { class: "num" }, "value"), el("th", {}, "source, or why it is null"))),
    el("tbody", {}, rows));
}

function paramChips(params, parentParams) {
  return el("div", { class: "params", id: "params" }, Object.entries(params || {}).map(([k, v]) => {
    const changed = parentParams && parentParams[k] !== v;
    return el("span", { class: `param${changed ? " changed" : ""}`, title: changed ? `parent: ${parentParams[k]}` : "" }, `${k}=${v}`);
  }));
}

function diffView(c, parent) {
  const box = el("div", { class: "diff", id: "diff" });
  if (!parent) {
    box.append(el("p", { class: "empty" }, "The baseline has no parent: its whole source is under Source."));
    return box;
  }
  if (!c.source || !parent.source) {
    box.append(el("p", { class: "empty" }, c.source ? "The parent has no source (rejected before rendering)."
      : "No source: this candidate was rejected before rendering."));
    return box;
  }
  if (c.source === parent.source) {
    box.append(el("p", { class: "empty" }, "Same source as its parent."));
    return box;
  }
  const patch = Diff.createTwoFilesPatch(`#${parent.iteration} ${parent.action || "baseline"}`,
    `#${c.iteration} ${c.action || "baseline"}`, parent.source, c.source, "", "", { context: 4 });
  // diff2html escapes the sources it renders: the one place markup is inserted
  box.innerHTML = Diff2Html.html(patch, { drawFileList: false, outputFormat: "line-by-line", matching: "lines" });
  return box;
}

function tabs(panes) {
  const bar = el("div", { class: "tabs", role: "tablist" });
  const holder = el("div", {});
  const show = (name) => {
    for (const b of bar.children) b.classList.toggle("active", b.dataset.tab === name);
    holder.replaceChildren(panes.find((p) => p[0] === name)[1]());
  };
  for (const [name] of panes) bar.append(el("button", { type: "button", dataset: { tab: name }, onclick: () => show(name) }, name));
  show(panes[0][0]);
  return [bar, holder];
}

function kv(pairs) {
  return el("dl", { class: "kv" }, pairs.filter((p) => p[1] !== null && p[1] !== undefined && p[1] !== "")
    .flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function sci(value) { return value === null || value === undefined ? "–" : Number(value).toExponential(2); }

async function renderCandidate(candidateId) {
  const panel = document.getElementById("candidate");
  panel.dataset.candidate = candidateId;
  panel.dataset.ready = "false";
  panel.replaceChildren(el("p", { class: "muted" }, "loading…"));
  let c; let parent = null;
  try {
    c = await detail(candidateId);
    if (c.parent_id) parent = await detail(c.parent_id);
  } catch (error) { panel.replaceChildren(el("p", { class: "error" }, String(error.message || error))); return; }
  if (state.selected !== candidateId) return;  // another one was clicked meanwhile
  const fb = c.feedback || {};
  const perf = fb.perf || {};
  const comp = fb.compile || {};
  const corr = fb.correctness || {};
  const d = fb.decision || {};
  const src = c.source ? el("pre", { class: "source", id: "source" }, c.source)
    : el("p", { class: "empty", id: "source" }, "No source: rejected before rendering.");
  const panes = [];
  if (parent) panes.push(["Diff against parent", () => diffView(c, parent)]);
  panes.push(["Source", () => src]);
  if (!parent) panes.push(["Diff against parent", () => diffView(c, parent)]);
  if (c.compile_log) panes.push(["Compile log", () => el("pre", { class: "source" }, c.compile_log)]);
  panel.replaceChildren(
    el("div", { class: "toolbar" },
      el("h2", { style: { margin: 0 } }, `#${c.iteration} · `, el("code", {}, c.action || "baseline")),
      statusBadge(c.status),
      FINAL.has(c.status) ? el("span", { class: c.accepted ? "acc" : "rej" }, c.accepted ? "✓ accepted" : "✗ reverted") : null),
    kv([
      ["proposed by", c.proposed_by],
      ["why it was tried", c.reason],
      failed(c) ? ["why it failed", el("span", { class: "failure" }, (state.byId.get(c.id) || {}).failure || c.status)]
        : ["decision", d.reason],
      ["parent", parent ? el("a", { href: "#", onclick: (e) => { e.preventDefault(); select(parent.id); } },
        `#${parent.iteration} ${parent.action || "baseline"}`) : "none (the baseline)"],
      ["time", perf.avg_us ? `${fmtUs(perf.avg_us)} · ${fmt(perf.throughput ?? perf.throughput_tflops)} ${perf.unit || "TFLOP/s"} · ${fmtVendor(perf.pct_of_vendor)} ${state.page.vendor || "the vendor"} · spread ${fmtPct(perf.spread_pct, 2)}` : null],
      ["runs", perf.runs_us ? perf.runs_us.map((r) => fmt(r, 1)).join(", ") + " µs" : null],
      ["compile", comp.seconds !== undefined ? `${fmt(comp.seconds)} s · ${comp.regs_per_thread ?? "–"} registers · ${comp.smem_bytes ?? "–"} B smem · ${comp.spill_bytes ?? "–"} B spills` : null],
      ["correctness", corr.tolerance !== undefined ? `${corr.passed ? "passed" : "failed"} · norm-relative error ${sci(corr.rel_err)} · max scaled error ${sci(corr.max_scaled_err)} (tolerance ${sci(corr.tolerance)})` : null],
    ]),
    failed(c) ? errorDetail(c) : null,
    el("h2", { style: { marginTop: "14px" } }, "Parameters ", el("span", { class: "hint" }, parent ? "(changed from the parent in yellow)" : "")),
    paramChips(c.params, parent ? parent.params : null),
    el("h2", { style: { marginTop: "14px" } }, "Profile"),
    profileTable(fb.profile || null),
    ...tabs(panes));
  panel.dataset.ready = "true";
}

// bring a row into view inside its scrolling box only (scrollIntoView would move the page)
function scrollWithin(box, row) {
  if (!box) return;
  const top = row.offsetTop - box.querySelector("thead").offsetHeight;
  if (top < box.scrollTop) box.scrollTop = top;
  else if (row.offsetTop + row.offsetHeight > box.scrollTop + box.clientHeight) {
    box.scrollTop = row.offsetTop + row.offsetHeight - box.clientHeight;
  }
}

function select(candidateId) {
  if (!state.byId.has(candidateId)) return;
  state.selected = candidateId;
  const url = new URL(location.href);
  url.searchParams.set("candidate", candidateId);
  history.replaceState(null, "", url);
  for (const row of document.querySelectorAll("#chain tbody tr")) {
    const on = row.dataset.id === candidateId;
    row.classList.toggle("selected", on);
    if (on) scrollWithin(row.closest(".scroll"), row);
  }
  redrawPlots();
  renderCandidate(candidateId);
}

// ---- live updates ----
function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(async () => {
    state.refreshTimer = null;
    try {
      await loadAll();
      renderAll();
      const best = (state.campaign.best || {}).candidate_id;
      if (!state.selected && best) select(best);  // the first correct kernel of a live campaign
    } catch (error) { showError(error); }
  }, 1000);
}

function setLive(text) {
  const badge = document.getElementById("live");
  badge.textContent = text;
  badge.classList.toggle("on", text === "live");
  badge.dataset.state = text;
}

function follow() {
  if (!["queued", "running"].includes(state.campaign.status)) { setLive(state.campaign.status); return; }
  state.stream = followEvents(`/campaigns/${encodeURIComponent(campaignId)}/events`, (kind) => {
    if (["result", "finished", "started", "note"].includes(kind)) scheduleRefresh();
  }, setLive);
}

function renderAll() {
  renderStats();
  buildPlot("iteration");
  buildPlot("time");
  renderChain();
  document.body.dataset.loaded = "true";
}

async function main() {
  document.getElementById("accepted-only").addEventListener("change", renderChain);
  try {
    await loadAll();
  } catch (error) {
    setLive("error");
    showError(error);
    return;
  }
  renderAll();
  const wanted = new URL(location.href).searchParams.get("candidate");
  const first = wanted && state.byId.has(wanted) ? wanted : (state.campaign.best || {}).candidate_id;
  if (first && state.byId.has(first)) select(first);
  follow();
}

// for tests and the curious: where a candidate's point is on screen, and selecting one
window.tuneforgeDashboard = {
  pointPosition(name, candidateId) {
    const plot = state.plots[name];
    const row = plot.model.rows.find((r) => r.point.id === candidateId);
    if (!row) return null;
    const rect = plot.u.over.getBoundingClientRect();
    return { x: rect.left + plot.u.valToPos(row.x, "x"), y: rect.top + plot.u.valToPos(row.y, "y") };
  },
  select,
  state,
};

document.addEventListener("DOMContentLoaded", main);
