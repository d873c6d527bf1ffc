// The crawlfleet dashboard: polls /api/dashboard every two seconds and draws what it says;
// the controls call the FSCADM methods over XML-RPC at /RPC2, as `crawlfleet admin` does.
"use strict";

const POLL_MS = 2000;
const $ = (id) => document.getElementById(id);

function fmt(n) {
  if (n === null || n === undefined) return "";
  const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [v, u] of units) if (Math.abs(n) >= v) return (n / v).toFixed(1) + u;
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

// ---- XML-RPC (FSCADM 2.1) ----

function xmlValue(v) {
  const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  if (Array.isArray(v)) {
    return "<array><data>" + v.map((x) => "<value>" + xmlValue(x) + "</value>").join("") +
      "</data></array>";
  }
  if (typeof v === "number") return "<int>" + v + "</int>";
  return "<string>" + esc(String(v)) + "</string>";
}

function readValue(node) {
  const t = node.firstElementChild;
  if (!t) return node.textContent;
  switch (t.tagName) {
    case "int": case "i4": case "i8": case "double": return Number(t.textContent);
    case "boolean": return t.textContent.trim() === "1";
    case "array":
      return [...t.querySelectorAll(":scope > data > value")].map(readValue);
    case "struct": {
      const o = {};
      for (const m of t.querySelectorAll(":scope > member")) {
        o[m.querySelector("name").textContent] = readValue(m.querySelector("value"));
      }
      return o;
    }
    default: return t.textContent;
  }
}

async function call(method, params) {
  const body = '<?xml version="1.0"?><methodCall><methodName>' + method +
    "</methodName><params>" + params.map((p) => "<param><value>" + xmlValue(p) +
    "</value></param>").join("") + "</params></methodCall>";
  const r = await fetch("/RPC2", { method: "POST", headers: { "Content-Type": "text/xml" }, body });
  if (!r.ok) throw new Error("HTTP " + r.status + ": " + (await r.text()));
  const doc = new DOMParser().parseFromString(await r.text(), "text/xml");
  const fault = doc.querySelector("methodResponse > fault > value");
  if (fault) {
    const f = readValue(fault);
    throw new Error("fault " + f.faultCode + ": " + f.faultString);
  }
  return readValue(doc.querySelector("methodResponse > params > param > value"));
}

// FSCADM results are [code, text] or a plain value.
function describe(v) {
  if (Array.isArray(v) && v.length === 2 && typeof v[1] === "string") return v[1];
  return JSON.stringify(v);
}

function confirmThen(text, action) {
  $("confirm-text").textContent = text;
  $("confirm").hidden = false;
  $("confirm-yes").onclick = async () => {
    $("confirm").hidden = true;
    const res = $("result");
    res.className = "";
    res.textContent = "…";
    try {
      res.textContent = describe(await action());
      res.className = "ok";
    } catch (e) {
      res.textContent = e.message;
      res.className = "fault";
    }
    poll();
  };
  $("confirm-no").onclick = () => { $("confirm").hidden = true; };
}

// ---- drawing ----

function chart(svg, points, unit) {
  const W = 600, H = 160, L = 48, B = 18;
  svg.replaceChildren();
  const ns = "http://www.w3.org/2000/svg";
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
  };
  add("line", { class: "axis", x1: L, y1: H - B, x2: W, y2: H - B });
  add("line", { class: "axis", x1: L, y1: 0, x2: L, y2: H - B });
  if (points.length < 2) {
    add("text", { x: L + 8, y: 20 }, "collecting samples…");
    return;
  }
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const max = Math.max(...points.map((p) => p[1]), 1e-9);
  const x = (t) => L + (W - L) * (t - t0) / Math.max(t1 - t0, 1);
  const y = (v) => (H - B) - (H - B - 8) * v / max;
  const d = points.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join("");
  add("path", { class: "area", d: d + "L" + x(t1) + " " + (H - B) + "L" + x(t0) + " " + (H - B) + "Z" });
  add("path", { class: "line", d });
  add("text", { x: 2, y: 12 }, fmt(max) + unit);
  add("text", { x: 2, y: H - B }, "0");
  const span = t1 - t0;
  add("text", { x: L, y: H - 4 }, span < 120 ? span + " s ago" : Math.round(span / 60) + " min ago");
  add("text", { x: W - 24, y: H - 4 }, "now");
}

function bars(box, hist) {
  const entries = Object.entries(hist || {}).sort((a, b) => b[1] - a[1]);
  box.replaceChildren();
  if (!entries.length) { box.append(el("div", { class: "n" }, "none")); return; }
  const max = entries[0][1];
  for (const [k, n] of entries) {
    box.append(el("div", { class: "row" },
      el("span", { class: "key" }, k),
      el("span", { class: "bar", style: "width:" + Math.max(2, 180 * n / max) + "px" }),
      el("span", { class: "n" }, fmt(n))));
  }
}

function addHist(acc, h) {
  for (const [k, n] of Object.entries(h || {})) acc[k] = (acc[k] || 0) + n;
  return acc;
}

function controls(c) {
  const suspended = c.suspended;
  const act = (label, action, text, fn) =>
    el("button", { "data-action": action, "data-collection": c.name,
      onclick: () => confirmThen(text, fn) }, label);
  return el("td", { class: "controls" },
    suspended
      ? act("Resume", "resume", "Resume crawling " + c.name + "?", () => call("CollectionResume", [c.name]))
      : act("Suspend", "suspend", "Suspend crawling " + c.name + "?", () => call("CollectionSuspend", [c.name])),
    act("Refetch", "refetch", "Refetch every document of " + c.name + "?",
      () => call("CollectionRefetch", [c.name, ""])),
    c.feeding
      ? act("Suspend feeding", "feeding-suspend", "Suspend feeding of " + c.name + "?",
        () => call("CollectionSuspendFeeding", [c.name, ""]))
      : act("Resume feeding", "feeding-resume", "Resume feeding of " + c.name + "?",
        () => call("CollectionResumeFeeding", [c.name, ""])));
}

function peerCard(p) {
  const card = el("div", { class: "card", "data-peer": p.name },
    el("h3", {}, p.name + " ", el("span", { class: p.up ? "" : "down" }, p.up ? p.addr : "unreachable")));
  const dl = el("dl");
  for (const [k, v] of Object.entries(p.figures || {})) {
    dl.append(el("dt", {}, k), el("dd", {}, fmt(v)));
  }
  card.append(dl);
  return card;
}

function render(d) {
  $("role").textContent = d.role + " · " + d.addr;
  let pages = 0, bytes = 0, queued = 0, indexed = 0;
  const http = {}, uriSkips = {}, docSkips = {};
  const body = $("collections").tBodies[0];
  body.replaceChildren();
  const select = $("add-collection");
  const chosen = select.value;
  select.replaceChildren();
  for (const c of d.collections) {
    pages += c.pages; bytes += c.bytes; queued += c.queued; indexed += c.indexed;
    addHist(http, c.http); addHist(uriSkips, c.uri_skips); addHist(docSkips, c.doc_skips);
    body.append(el("tr", { "data-collection": c.name },
      el("td", {}, c.name), el("td", { class: "state" }, c.status), el("td", {}, c.crawl_mode || "—"),
      el("td", {}, fmt(c.queued)), el("td", {}, fmt(c.active_sites)), el("td", { class: "pages" }, fmt(c.pages)),
      el("td", {}, fmt(c.bytes)), el("td", {}, fmt(c.stored)), el("td", {}, fmt(c.fed)),
      el("td", {}, fmt(c.indexed)), el("td", {}, c.feeding ? "yes" : "suspended"), controls(c)));
    select.append(el("option", { value: c.name }, c.name));
  }
  if (chosen) select.value = chosen;
  $("pages-total").textContent = pages;
  $("bytes-total").textContent = fmt(bytes);
  $("queued-total").textContent = fmt(queued);
  $("indexed-total").textContent = fmt(indexed);
  chart($("chart-pages"), d.history.map((p) => [p[0], p[1]]), "/s");
  chart($("chart-bytes"), d.history.map((p) => [p[0], p[2]]), "B/s");
  bars($("hist-http"), http);
  bars($("hist-uri-skips"), uriSkips);
  bars($("hist-doc-skips"), docSkips);
  const nodes = $("nodes").tBodies[0];
  nodes.replaceChildren();
  for (const n of d.nodes) {
    nodes.append(el("tr", {}, el("td", {}, n.id), el("td", {}, n.admin || ""),
      el("td", {}, n.connected ? "yes" : "no"), el("td", {}, fmt(n.sites)),
      el("td", {}, fmt(n.pages)), el("td", {}, fmt(n.rate))));
  }
  const dist = $("distributors").tBodies[0];
  dist.replaceChildren();
  for (const p of d.distributors || []) {
    const f = p.figures || {};
    const n = (k) => el("td", {}, k in f ? fmt(f[k]) : "—");
    dist.append(el("tr", { "data-distributor": p.name },
      el("td", {}, p.name), el("td", { class: p.up ? "" : "down" }, p.up ? p.addr : "unreachable"),
      el("td", { class: "election" }, p.election || "—"), n("sessions"), n("connections"),
      n("documents"), n("documents/s"), n("operations/s"), n("load")));
  }
  if (!(d.distributors || []).length) {
    dist.append(el("tr", {}, el("td", { colspan: 9, class: "n" }, "none (up --distributors N, or --dashboard-peer)")));
  }
  $("peers").replaceChildren(...d.peers.map(peerCard));
  if (!d.peers.length) $("peers").append(el("div", { class: "n" }, "none given (--dashboard-peer)"));
}

let timer = null;
async function poll() {
  clearTimeout(timer);
  try {
    const r = await fetch("/api/dashboard", { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    $("status").textContent = "updated " + new Date().toLocaleTimeString();
    $("status").className = "";
  } catch (e) {
    $("status").textContent = "cannot reach the scheduler: " + e.message;
    $("status").className = "stale";
  }
  timer = setTimeout(poll, POLL_MS);
}

$("add-uris").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const coll = $("add-collection").value;
  const uris = $("add-list").value.split(/\s+/).filter((u) => u);
  if (!coll || !uris.length) return;
  const urgent = $("add-urgent").checked ? 1 : 0;
  confirmThen("Add " + uris.length + " URI(s) to " + coll + "?",
    () => call("AddURIs", [coll, urgent, uris]));
});
poll();
