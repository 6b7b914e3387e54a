// The team history page: GET /history, the best result per kernel, shape and GPU.
"use strict";

let entries = [];

function render() {
  const needle = document.getElementById("filter").value.trim().toLowerCase();
  const shown = entries.filter((e) => !needle || [e.kernel, shapeText(e),
    e.shape_text, e.gpu, e.backend].join(" ").toLowerCase().includes(needle));
  const body = document.querySelector("#history tbody");
  body.replaceChildren(...shown.map((e) => el("tr", { dataset: { campaign: e.campaign_id } },
    el("td", {}, e.kernel),
    el("td", { class: "mono" }, shapeText(e)),
    el("td", {}, e.gpu || "–", el("div", { class: "hint" }, e.backend)),
    el("td", { class: "num" }, `${fmt(e.throughput)} ${e.unit}`),
    el("td", { class: "num" }, fmtUs(e.avg_us)),
    el("td", { class: "num" }, e.campaigns),
    el("td", {}, paramsCell(e.params)),
    el("td", {}, el("a", { class: "mono", href: `/ui/campaigns/${encodeURIComponent(e.campaign_id)}` },
      e.campaign_id.slice(0, 8))),
    el("td", {}, when(e.finished_at)))));
  if (!shown.length) {
    body.append(el("tr", {}, el("td", { colspan: 9, class: "empty" },
      entries.length ? "Nothing matches the filter." : "No finished result yet.")));
  }
  document.getElementById("count").textContent = `${shown.length} of ${entries.length}`;
}

async function load() {
  try {
    entries = await api("/history");
    render();
    document.body.dataset.loaded = "true";
  } catch (error) { showError(error); }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("filter").addEventListener("input", render);
  load();
});
