// The campaigns page: the team's campaigns with status, best throughput (in the family's unit),
// its speed against the vendor's (× vendor), evaluations.
"use strict";

let campaigns = [];

function campaignRow(c) {
  const best = c.best || {};
  const href = `/ui/campaigns/${encodeURIComponent(c.id)}`;
  return el("tr", { class: "clickable", dataset: { id: c.id }, onclick: () => { location.href = href; } },
    el("td", {}, el("a", { href, class: "mono" }, c.id.slice(0, 8))),
    el("td", {}, statusBadge(c.status, CAMPAIGN_COLOURS),
      c.status_reason ? el("div", { class: "hint" }, c.status_reason) : null),
    el("td", { title: c.kernel }, familyLabel(c), el("div", { class: "hint" }, shapeText(c)),
      c.set_id ? el("div", { class: "hint" }, el("a", {
        href: `/ui/sets/${encodeURIComponent(c.set_id)}`, onclick: (e) => e.stopPropagation(),
      }, `shape set ${c.set_id.slice(0, 8)} #${c.set_index + 1}`)) : null),
    el("td", {}, c.policy),
    el("td", {}, c.backend, el("div", { class: "hint" }, c.gpu || "–")),
    el("td", { class: "num" }, `${c.evaluations} / ${c.budget.iterations}`),
    el("td", { class: "num" }, best.throughput !== undefined ? `${fmt(best.throughput)} ${unitOf(c)}` : "–"),
    el("td", { class: "num" }, fmtVendor(c.pct_of_vendor)),
    el("td", { class: "num" }, c.speedup_vs_baseline ? `${fmt(c.speedup_vs_baseline, 1)}×` : "–"),
    el("td", {}, when(c.created_at)));
}

function render() {
  const needle = document.getElementById("filter").value.trim().toLowerCase();
  const shown = campaigns.filter((c) => !needle || [c.id, c.status, c.kernel, familyLabel(c), shapeText(c),
    c.shape_text, c.gpu, c.policy, c.backend]
    .join(" ").toLowerCase().includes(needle));
  const body = document.querySelector("#campaigns tbody");
  body.replaceChildren(...shown.map(campaignRow));
  if (!shown.length) {
    body.append(el("tr", {}, el("td", { colspan: 10, class: "empty" },
      campaigns.length ? "No campaign matches the filter." : "No campaign yet.")));
  }
  document.getElementById("count").textContent = `${shown.length} of ${campaigns.length}`;
}

async function load() {
  try {
    campaigns = await api("/campaigns?limit=200");
    render();
    document.body.dataset.loaded = "true";
    if (campaigns.some((c) => c.status === "running" || c.status === "queued")) setTimeout(load, 5000);
  } catch (error) { showError(error); }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("filter").addEventListener("input", render);
  load();
});
