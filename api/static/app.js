// tuneforge dashboard: helpers shared by every page (API calls with the team key, DOM building,
// formatting). Plain browser JavaScript, no build step. Data is only ever put into the page as
// text (el(), textContent), never as HTML.
"use strict";

const API = "/api/v1";
const KEY_STORAGE = "tuneforge.apiKey";

// every final status's colour, in the vocabulary's order: the server's (the points page's
// status_colours), filled in when the page loads
const STATUS_COLOURS = {};
const CAMPAIGN_COLOURS = {
  queued: "#868e96", running: "#1971c2", done: "#2b8a3e", failed: "#c92a2a", cancelled: "#e67700",
};

class ApiError extends Error {
  // detail: the API's own (a string, or a 422's list of {loc, msg})
  constructor(status, message, detail) { super(message); this.status = status; this.detail = detail; }
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name === "style") Object.assign(node.style, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function getKey() { return localStorage.getItem(KEY_STORAGE) || ""; }

function setKey(key) {
  if (key) localStorage.setItem(KEY_STORAGE, key); else localStorage.removeItem(KEY_STORAGE);
}

// The API key form: shown when no key is stored or the stored one is refused; resolves once a
// key is saved (the page then reloads its data).
function askForKey(message) {
  return new Promise((resolve) => {
    const old = document.getElementById("key-dialog");
    if (old) old.remove();
    const input = el("input", {
      type: "password", id: "api-key", name: "api-key", autocomplete: "off", required: true,
      placeholder: "tf_…", size: 48, "aria-label": "API key",
    });
    const form = el("form", {
      id: "key-form",
      onsubmit: (event) => {
        event.preventDefault();
        const key = input.value.trim();
        if (!key) return;
        setKey(key);
        dialog.remove();
        renderKeyBadge();
        resolve(key);
      },
    },
    el("h2", {}, "Team API key"),
    el("p", {}, message || "The dashboard reads the tuneforge API with your team's key. It is "
      + "kept in this browser (localStorage) and sent only to this server, as X-API-Key."),
    el("p", { class: "hint" }, "An admin creates one with ",
      el("code", {}, "tuneforge admin create-team NAME"), "."),
    el("div", { class: "row" }, input, el("button", { type: "submit" }, "Save")));
    const dialog = el("div", { id: "key-dialog", class: "overlay", role: "dialog" }, form);
    document.body.append(dialog);
    input.focus();
  });
}

async function api(path, options) {
  for (;;) {
    let key = getKey();
    if (!key) key = await askForKey();
    const response = await fetch(API + path, {
      ...(options || {}), headers: { "X-API-Key": key, ...((options || {}).headers || {}) },
    });
    if (response.status === 401) {
      const body = await response.json().catch(() => ({}));
      setKey("");
      await askForKey(`The server refused the key: ${body.detail || response.statusText}. `
        + "Enter a valid key of your team.");
      continue;
    }
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      const detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
      throw new ApiError(response.status, `${response.status}: ${detail || response.statusText}`,
        body.detail);
    }
    return response.json();
  }
}

// Every page of a paged endpoint (?limit=&offset=, answering {items, total}).
async function apiAll(path, pageSize) {
  const items = [];
  let first = null;
  for (;;) {
    const sep = path.includes("?") ? "&" : "?";
    const page = await api(`${path}${sep}limit=${pageSize}&offset=${items.length}`);
    first = first || page;
    items.push(...page.items);
    if (items.length >= page.total || page.items.length === 0) break;
  }
  return { ...first, items };
}

// Server-sent events read with fetch() streaming, so that the key travels in the X-API-Key
// header (EventSource cannot send headers). Resumes after the last event id on a broken stream.
// Calls onEvent(kind, data, id); returns when the "finished" event comes or stop() is called.
function followEvents(path, onEvent, onState) {
  let stopped = false;
  let controller = null;
  let after = 0;
  const run = async () => {
    while (!stopped) {
      controller = new AbortController();
      try {
        onState("connecting");
        const response = await fetch(`${API}${path}?after=${after}`, {
          headers: { "X-API-Key": getKey(), Accept: "text/event-stream" },
          signal: controller.signal,
        });
        if (!response.ok) { onState(`stream refused (${response.status})`); return; }
        onState("live");
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let kind = "message"; let id = null; const data = [];
            for (const line of frame.split("\n")) {
              if (line.startsWith(":")) continue;
              const colon = line.indexOf(":");
              const field = colon < 0 ? line : line.slice(0, colon);
              const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
              if (field === "event") kind = val;
              else if (field === "id") id = Number(val);
              else if (field === "data") data.push(val);
            }
            if (id !== null) after = id;
            if (!data.length) continue;
            onEvent(kind, JSON.parse(data.join("\n")), id);
            if (kind === "finished") { onState("finished"); stopped = true; return; }
          }
        }
      } catch (error) {
        if (stopped) return;
      }
      if (!stopped) { onState("reconnecting"); await new Promise((r) => setTimeout(r, 2000)); }
    }
  };
  run();
  return { stop: () => { stopped = true; if (controller) controller.abort(); } };
}

// ---- formatting ----
function fmt(value, digits) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return Number(value).toFixed(digits === undefined ? 2 : digits);
}
function fmtUs(us) { return us ? `${fmt(us, 1)} µs` : "–"; }
// a kernel's speed against the vendor's, as every page writes it: 4.07× (pct: the vendor's
// time over the kernel's, in %)
function fmtVendor(pct) { return pct === null || pct === undefined ? "–" : `${fmt(pct / 100, 2)}×`; }
function fmtPct(value, digits) { return value === null || value === undefined ? "–" : `${fmt(value, digits === undefined ? 1 : digits)}%`; }
// a shape as the family writes it (the API sends it with every campaign and history entry)
function shapeText(item) { return (item.shape_text || Object.values(item.shape || {}).join("x")).replaceAll("x", "×"); }
// a campaign's family as people call it: a team family's name and version, or a built-in's name
function familyLabel(c) { return c.family_version ? `${c.family} v${c.family_version}` : c.kernel; }
// the unit a campaign's throughputs are in (TFLOP/s for a flops metric, GB/s for bytes moved)
function unitOf(item) { return (item.metric && item.metric.unit) || item.unit || "TFLOP/s"; }
// a point's parameters as chips (name=value; a list or object value as JSON)
function paramsCell(params) {
  return el("div", { class: "params" }, Object.entries(params || {}).map(([k, v]) =>
    el("span", { class: "param" }, `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)));
}
function when(iso) {
  if (!iso) return "–";
  const date = new Date(iso);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}
function statusBadge(status, colours) {
  const colour = (colours || STATUS_COLOURS)[status] || "#495057";
  return el("span", { class: "badge", style: { background: colour }, dataset: { status } }, status);
}

function renderKeyBadge() {
  const slot = document.getElementById("key-slot");
  if (!slot) return;
  slot.replaceChildren();
  const key = getKey();
  if (!key) return;
  slot.append(el("span", { class: "muted" }, `key ${key.slice(0, 11)}…`), " ",
    el("button", { class: "link", type: "button", onclick: () => { setKey(""); location.reload(); } },
      "forget"));
}

function showError(error) {
  const box = document.getElementById("error");
  if (!box) return;
  box.hidden = false;
  box.textContent = error instanceof ApiError ? error.message : `Something failed: ${error}`;
}

document.addEventListener("DOMContentLoaded", renderKeyBadge);
