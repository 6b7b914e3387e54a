// The library page: GET /library/{family} (the best known point at every measured shape, with
// its near-ties and provenance) for a family and GPU, and GET /library/{family}/pick for the
// shape typed in. The family and GPU are kept in the URL (?family=&gpu=).
"use strict";

let current = null;

function query() { return new URLSearchParams(location.search); }

function tiesCell(entry) {
  const ties = entry.alternates || [];
  if (!ties.length) return "–";
  return el("div", {}, `${ties.length}`, el("div", { class: "hint" },
    ties.map((t) => `+${fmt(100 * (t.avg_us / entry.avg_us - 1), 1)}%`).join(" · ")));
}

function entryRow(e) {
  const href = `/ui/campaigns/${encodeURIComponent(e.campaign_id)}`;
  return el("tr", { dataset: { shape: e.shape } },
    el("td", { class: "mono" }, e.shape.replaceAll("x", "×")),
    el("td", { class: "num" }, fmtUs(e.avg_us)),
    el("td", { class: "num" }, fmtUs(e.vendor_us)),
    el("td", { class: "num" }, e.x_vendor ? `${fmt(e.x_vendor, 2)}×` : "–",
      e.vendor_us && e.vendor_us < e.avg_us ? el("div", { class: "hint" }, "the vendor runs") : null),
    el("td", {}, tiesCell(e)),
    el("td", {}, paramsCell(e.params)),
    el("td", {}, el("a", { class: "mono", href }, e.campaign_id.slice(0, 8)), ` #${e.iteration}`,
      el("div", { class: "hint" }, e.backend)),
    el("td", {}, when(e.measured_at)),
    el("td", { class: "mono" }, e.commit || "–"));
}

function options(select, values, chosen) {
  select.replaceChildren(...values.map((v) => el("option", { value: v, selected: v === chosen }, v)));
}

function showPick(chosen) {
  const what = chosen.kind === "vendor" ? el("span", {}, "the vendor")
    : paramsCell(chosen.params);
  const unmeasured = chosen.kind === "point" && !chosen.measured_at_shape;
  document.getElementById("pick").replaceChildren(
    el("div", { dataset: { rule: chosen.rule, kind: chosen.kind } },
      el("strong", { class: "mono" }, chosen.shape.replaceAll("x", "×")),
      `: rule ${chosen.rule}, ${chosen.reason}`),
    el("div", { class: "toolbar" }, el("span", { class: "muted" }, "runs"), what),
    unmeasured ? el("div", { class: "hint" }, "Never measured at this shape: an export runs "
      + "the vendor here unless --unmeasured, and ",
      el("code", {}, `tuneforge library probe --kernel ${current.family} --shapes ${chosen.shape}`),
      " measures it once.") : null);
}

async function pick(event) {
  if (event) event.preventDefault();
  const shape = document.getElementById("shape").value.trim();
  if (!shape || !current) return;
  const params = new URLSearchParams({ shape });
  if (current.gpu) params.set("gpu", current.gpu);
  const box = document.getElementById("pick");
  try {
    showPick(await api(`/library/${encodeURIComponent(current.family)}/pick?${params}`));
  } catch (error) {
    const message = error instanceof ApiError && Array.isArray(error.detail)
      ? error.detail.map((d) => d.msg).join("; ") : String(error.message || error);
    box.replaceChildren(el("div", { class: "error", role: "alert" }, message));
  }
  box.dataset.shown = shape;  // what the box answers (the page's tests wait on it)
}

async function load() {
  try {
    const families = (await api("/families")).map((f) => f.name);
    // by default the family of the team's first result, else the first family
    const tuned = (await api("/history")).map((h) => h.family || h.kernel)
      .find((name) => families.includes(name));
    const wanted = query().get("family") || tuned || families[0];
    options(document.getElementById("family"), families, wanted);
    const gpu = query().get("gpu");
    const lib = await api(`/library/${encodeURIComponent(wanted)}${gpu ? `?gpu=${encodeURIComponent(gpu)}` : ""}`);
    current = lib;
    options(document.getElementById("gpu"), lib.gpus.length ? lib.gpus : ["–"], lib.gpu || "–");
    const ties = lib.entries.reduce((n, e) => n + (e.alternates || []).length, 0);
    const count = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
    document.getElementById("summary").textContent = lib.gpu
      ? `${count(lib.entries.length, "shape")} · ${count(ties, "near-tie")} on ${lib.gpu}`
      : "nothing measured yet";
    const body = document.querySelector("#entries tbody");
    body.replaceChildren(...lib.entries.map(entryRow));
    if (!lib.entries.length) {
      body.append(el("tr", {}, el("td", { colspan: 9, class: "empty" },
        `The team has measured no ${lib.family} point yet: every shape runs the vendor.`)));
    }
    document.getElementById("rule").textContent = lib.rule;
    document.getElementById("export").textContent =
      `tuneforge library export --kernel ${lib.family}${lib.gpu ? ` --gpu "${lib.gpu}"` : ""} `
      + `--out DIR --url ${location.origin}`;
    const shape = document.getElementById("shape");
    if (!shape.value && lib.entries.length) shape.placeholder = lib.entries[0].shape;
    document.body.dataset.loaded = "true";
  } catch (error) { showError(error); }
}

function navigate() {
  const params = new URLSearchParams({ family: document.getElementById("family").value });
  const gpu = document.getElementById("gpu").value;
  if (this && this.id === "gpu" && gpu && gpu !== "–") params.set("gpu", gpu);
  location.search = params.toString();
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("family").addEventListener("change", navigate);
  document.getElementById("gpu").addEventListener("change", navigate);
  document.getElementById("pick-form").addEventListener("submit", pick);
  load();
});
