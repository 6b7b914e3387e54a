// A shape set's page: a row a shape (its campaign, progress, best, × vendor, % of peak,
// GPU-seconds, evaluations served from history), refreshed while the set runs.
"use strict";

function setId() { return decodeURIComponent(location.pathname.split("/").filter(Boolean).pop()); }

function shapeRow(row, unit) {
  const best = row.best || {};
  const href = `/ui/campaigns/${encodeURIComponent(row.campaign_id)}`;
  const done = row.budget ? Math.min(100, Math.round(100 * row.evaluations / row.budget)) : 0;
  return el("tr", { class: "clickable", dataset: { id: row.campaign_id }, onclick: () => { location.href = href; } },
    el("td", {}, el("a", { href, class: "mono" }, row.shape.replaceAll("x", "×"))),
    el("td", { class: "num" }, fmt(row.weight)),
    el("td", {}, statusBadge(row.status, CAMPAIGN_COLOURS),
      row.reason ? el("div", { class: "hint" }, row.reason) : null),
    el("td", { class: "num" }, `${row.evaluations} / ${row.budget}`,
      el("div", { class: "bar", title: `${done}%` }, el("span", { style: { width: `${done}%` } }))),
    el("td", { class: "num" }, best.avg_us ? fmtUs(best.avg_us) : "–",
      best.throughput ? el("div", { class: "hint" }, `${fmt(best.throughput)} ${unit}`) : null),
    el("td", { class: "num" }, row.x_vendor ? `${fmt(row.x_vendor, 2)}×` : "–"),
    el("td", { class: "num" }, fmtPct(row.pct_of_peak, 0)),
    el("td", { class: "num" }, fmt(row.gpu_seconds, 1)),
    el("td", { class: "num" }, String(row.served_from_history)));
}

async function load() {
  try {
    const set = await api(`/shape-sets/${encodeURIComponent(setId())}`);
    document.getElementById("title").textContent =
      `Shape set ${set.set_id.slice(0, 8)} · ${set.kernel} · ${set.shapes.length} shapes`;
    document.getElementById("summary").replaceChildren(
      statusBadge(set.status, CAMPAIGN_COLOURS), " ",
      `${set.evaluations} of ${set.budget} evaluations · ${fmt(set.gpu_seconds, 1)} GPU-seconds · ` +
      `${set.served_from_history} served from history` + (set.reason ? ` · ${set.reason}` : ""));
    document.querySelector("#shapes tbody").replaceChildren(...set.shapes.map((r) => shapeRow(r, set.unit)));
    document.body.dataset.loaded = "true";
    if (set.status === "running" || set.status === "queued") setTimeout(load, 2000);
  } catch (error) { showError(error); }
}

document.addEventListener("DOMContentLoaded", load);
