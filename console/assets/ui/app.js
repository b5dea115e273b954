// The oke console. It reads the JSON admin API beside this page and builds
// every element with createElement, textContent and setAttribute, never
// through the HTML parser, so nothing stored (an input, a stored body, an error) can
// become markup. Pages are hash routes: #/flows, #/runs?…, #/runs/ID,
// #/idempotency?…, #/schedules.
"use strict";

(function () {
  // The admin API's base: the page's own path ("/_oke/").
  const base = location.pathname.replace(/[^/]*$/, "");
  // root is the page's <main>; main is where the page being drawn puts its
  // elements: off the document until its first load is in (route).
  const root = document.getElementById("main");
  let main = root;
  let cleanup = []; // what the current page must stop when it is left
  // Stored bodies revealed on the idempotency pages, by row (rowId): a row
  // drawn again — by a lookup's page taking the old one's place, by a reload
  // — shows its body still, and a Reveal clicked on a row that is redrawn
  // before its answer comes shows the body on the row as drawn now.
  // Forgotten when another page is opened.
  const revealed = new Map();

  // el builds an element: attrs are attributes (set with setAttribute),
  // except "text" (textContent), "class", and "on…" (listeners); children
  // are nodes or strings (text nodes).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") e.textContent = String(v);
      else if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  class APIError extends Error {
    constructor(status, code, message) {
      super(code ? code + ": " + message : message);
      this.status = status;
      this.code = code;
    }
  }

  // api calls the admin API (same origin, with the session cookie).
  async function api(method, path, body) {
    const opts = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const r = await fetch(base + path, opts);
    let j = null;
    try {
      j = await r.json();
    } catch (_) {
      j = null;
    }
    if (!r.ok) {
      if (r.status === 401) {
        location.reload(); // the session ended: the login form
      }
      const e = j && j.error ? j.error : { code: "", message: "HTTP " + r.status };
      throw new APIError(r.status, e.code, e.message);
    }
    return j;
  }

  function qs(params) {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== "") u.set(k, v);
    }
    const s = u.toString();
    return s ? "?" + s : "";
  }

  function errorBox(err) {
    return el("div", { class: "error", role: "alert", "data-error": "" }, String(err && err.message ? err.message : err));
  }

  // Times are ISO 8601 with their zone, in UTC (the default) or this
  // browser's zone: the toggle in the header (data-action="tz") switches,
  // and localStorage remembers the choice.
  const tzKey = "oke.console.tz";
  function tzMode() {
    try {
      return localStorage.getItem(tzKey) === "local" ? "local" : "utc";
    } catch (_) {
      return "utc";
    }
  }
  const p2 = (n) => String(n).padStart(2, "0");
  function fmtTime(s) {
    if (!s) return "–";
    const d = new Date(s);
    if (isNaN(d) || d.getUTCFullYear() < 2) return "–";
    const ms = "." + String(d.getUTCMilliseconds()).padStart(3, "0");
    if (tzMode() === "utc") return d.toISOString().slice(0, 19) + ms + "Z";
    const off = -d.getTimezoneOffset();
    const zone = off === 0 ? "Z" : (off > 0 ? "+" : "-") + p2(Math.floor(Math.abs(off) / 60)) + ":" + p2(Math.abs(off) % 60);
    return `${d.getFullYear()}-${p2(d.getMonth() + 1)}-${p2(d.getDate())}T${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())}${ms}${zone}`;
  }
  function timeEl(s) {
    return el("time", { class: "nowrap", datetime: s || undefined, text: fmtTime(s) });
  }
  const tzButton = el("button", { type: "button", class: "tz", "data-action": "tz", onclick: () => {
    try {
      localStorage.setItem(tzKey, tzMode() === "utc" ? "local" : "utc");
    } catch (_) { /* private mode: this page only */ }
    tzLabel();
    route();
  } });
  const tzLabel = () => {
    tzButton.dataset.tz = tzMode();
    tzButton.textContent = tzMode() === "utc" ? "Times: UTC" : "Times: local";
    tzButton.title = "Show times in " + (tzMode() === "utc" ? "this browser's zone" : "UTC");
  };
  tzLabel();
  { const nav = document.querySelector("header.top nav"); if (nav) nav.after(tzButton); }

  // confirm asks in the page (not window.confirm: a browser test clicks
  // it) before a destructive action: a dialog (data-dialog="confirm") that
  // says what will happen, with data-action="confirm" and "dismiss".
  function confirmDialog(text, okLabel) {
    return new Promise((resolve) => {
      const done = (v) => {
        back.remove();
        document.removeEventListener("keydown", key);
        resolve(v);
      };
      const key = (ev) => { if (ev.key === "Escape") done(false); };
      const ok = el("button", { class: "danger", type: "button", "data-action": "confirm", text: okLabel || "Confirm", onclick: () => done(true) });
      const box = el("div", { class: "dialog", role: "alertdialog", "aria-modal": "true", "data-dialog": "confirm" },
        el("p", { "data-dialog-text": "", text }),
        el("div", { class: "actions" }, ok, el("button", { class: "secondary", type: "button", "data-action": "dismiss", text: "Keep", onclick: () => done(false) })));
      const back = el("div", { class: "backdrop", onclick: (ev) => { if (ev.target === back) done(false); } }, box);
      document.addEventListener("keydown", key);
      cleanup.push(() => { if (back.isConnected) done(false); });
      document.body.append(back);
      ok.focus();
    });
  }

  // labelCells gives each cell of a table its column's name
  // (data-label), shown beside the value when a narrow screen stacks the
  // table's rows.
  function labelCells(table) {
    const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
    for (const tr of table.querySelectorAll("tbody tr")) {
      [...tr.children].forEach((td, i) => { if (heads[i] && !td.hasAttribute("colspan")) td.dataset.label = heads[i]; });
    }
  }

  function fmtMs(ms) {
    if (ms === undefined || ms === null) return "–";
    if (ms < 1000) return (Math.round(ms * 10) / 10) + " ms";
    const s = ms / 1000;
    if (s < 120) return (Math.round(s * 10) / 10) + " s";
    const m = s / 60;
    if (m < 120) return Math.round(m) + " min";
    const h = m / 60;
    if (h < 48) return Math.round(h * 10) / 10 + " h";
    return Math.round(h / 24) + " d";
  }

  function json(v) {
    if (v === undefined || v === null) return "";
    return typeof v === "string" ? v : JSON.stringify(v, null, 2);
  }

  function statusEl(s) {
    return el("span", { class: "status " + s, text: s });
  }

  // --- routing ---------------------------------------------------------------

  function route() {
    for (const f of cleanup) f();
    cleanup = [];
    const h = location.hash.replace(/^#/, "") || "/flows";
    const [path, query] = h.split("?");
    const params = new URLSearchParams(query || "");
    const parts = path.split("/").filter(Boolean);
    const page = parts[0] || "flows";
    if (page !== "idempotency") revealed.clear();
    for (const a of document.querySelectorAll("[data-nav]")) {
      a.classList.toggle("active", a.getAttribute("data-nav") === page);
    }
    // The new page is drawn off the document and takes the old one's place
    // once its first load is in, in one step: what is shown is always a
    // whole page, the old one or the new one, never a half-drawn one (a
    // browser test waiting for an element sees it on the page it asked for).
    const view = document.createElement("div");
    main = view;
    let drawn;
    try {
      if (page === "runs" && parts.length > 1) {
        drawn = runPage(decodeURIComponent(parts.slice(1).join("/")));
      } else if (page === "runs") {
        drawn = runsPage(params);
      } else if (page === "idempotency") {
        drawn = rowsPage(params);
      } else if (page === "schedules") {
        drawn = schedulesPage();
      } else {
        drawn = flowsPage();
      }
    } catch (e) {
      view.append(errorBox(e));
    }
    Promise.resolve(drawn).catch((e) => view.append(errorBox(e))).finally(() => {
      if (main !== view) return; // left before it was drawn
      root.replaceChildren(...view.childNodes);
      main = root;
      root.dataset.shown = h; // the page shown now, drawn whole
    });
  }

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  // live follows an SSE feed until the page is left.
  function live(path, event, onData, onError) {
    const es = new EventSource(base + path);
    es.addEventListener(event, (m) => onData(JSON.parse(m.data)));
    es.addEventListener("error", (m) => {
      if (m.data) {
        try {
          onError(JSON.parse(m.data).error.message);
        } catch (_) { /* not ours */ }
      }
    });
    cleanup.push(() => es.close());
    return es;
  }

  // --- flows -----------------------------------------------------------------

  async function flowsPage() {
    main.append(el("h1", { text: "Flows" }));
    let data;
    try {
      data = await api("GET", "flows");
    } catch (e) {
      main.append(errorBox(e));
      return;
    }
    if (!data.flows.length) {
      main.append(el("p", { class: "muted", text: "This app binds no flows." }));
      return;
    }
    // The index: one compact row per flow, found by name and narrowed by
    // its kind; a row opens into the flow's whole contract.
    const search = el("input", { type: "search", placeholder: "search by name", "data-input": "flow-search", "aria-label": "search flows by name" });
    const sel = (name, label, opts) => el("select", { "data-input": name, "aria-label": label }, opts.map(([v, t]) => el("option", { value: v, text: t })));
    const durable = sel("flow-durable", "durable", [["", "durable or not"], ["yes", "durable"], ["no", "not durable"]]);
    const mode = sel("flow-mode", "idempotency mode", [["", "any idempotency"], ["required", "required"], ["auto", "auto"], ["off", "off"]]);
    const claim = sel("flow-claim", "claim", [["", "any claim"], ["first", "claim first"], ["in_tx", "claim in_tx"]]);
    const count = el("span", { class: "muted", "data-flow-count": "" });
    main.append(el("form", { class: "filters", onsubmit: (ev) => ev.preventDefault() },
      el("label", {}, "name", search), el("label", {}, "durable", durable), el("label", {}, "idempotency", mode), el("label", {}, "claim", claim), count));
    const tbody = el("tbody");
    const table = el("table", { class: "flows", "data-flows": "" }, el("thead", {}, el("tr", {},
      ["flow", "kind", "executions", "replays", "errors", "claim (mean)"].map((h) => el("th", { text: h })))), tbody);
    const rows = [];
    for (const f of data.flows) {
      const honoredMode = f.honored ? f.mode : "off";
      const kind = el("td", {});
      if (f.pill) kind.append(el("span", { class: "pill " + f.mode, "data-pill": "idempotency", title: "Idempotency-Key: " + f.mode + ", stored responses kept " + f.ttl, text: f.pill }));
      if (f.durable) kind.append(el("span", { class: "pill durable", text: "durable" }));
      if (f.coalesced) kind.append(el("span", { class: "pill durable", "data-pill": "coalesced", title: "Every step's writes are statements in the run's one transaction (oke extract proved it): a keyed request commits once, its steps, journal and answer together", text: "one commit" }));
      if (f.contract && f.contract !== "fresh") kind.append(el("span", { class: "pill " + f.contract, title: f.contractProblem || "", text: "contract " + f.contract }));
      const st = f.stats || {};
      const facts = el("dl", { class: "facts" });
      const fact = (k, ...v) => facts.append(el("dt", { text: k }), el("dd", {}, ...v));
      if (f.description) fact("about", f.description);
      fact("shape", f.shape);
      fact("bindings", el("ul", { class: "plain" }, (f.bindings || []).map((b) => el("li", { class: "mono", text: b }))));
      fact("idempotency", f.mode + (f.mode !== "off" ? ", TTL " + f.ttl : "") + (f.honored ? "" : " (the header is not honored here)"));
      if (f.mode !== "off" && f.honored) fact("claim", f.claim === "in_tx" ? "in_tx — held by the flow's transaction" : f.claim === "first" ? "first — claimed before the flow runs" : f.claim);
      const effects = el("ul", { class: "plain" });
      for (const e of f.effects || []) {
        const li = el("li", {}, el("span", { class: "mono", text: e }));
        for (const w of (f.why && f.why[e]) || []) li.append(el("div", { class: "why", text: w }));
        effects.append(li);
      }
      if (!(f.effects || []).length) effects.append(el("li", { class: "muted", text: "none" }));
      const from = { contract: "inferred by oke extract", declared: "declared in Options.Effects", undeclared: "none declared: assumed to write" }[f.effectsFrom] || f.effectsFrom;
      fact("effects", effects, el("div", { class: "muted", text: from }));
      if (f.steps && f.steps.length) fact("steps", f.steps.join(" → ") + (f.coalesced ? " (coalesced: one transaction, one commit)" : ""));
      if (st.outcomes) fact("outcomes", Object.entries(st.outcomes).map(([k, v]) => k + " " + v).join(" · "));
      if (f.durable) fact("runs", el("a", { href: "#/runs" + qs({ flow: f.name }), text: "this flow's runs" }));
      if (f.source) fact("source", el("span", { class: "mono", text: f.source }));
      const name = el("details", { class: "flow" }, el("summary", { class: "mono", text: f.name }), facts);
      const tr = el("tr", { "data-flow": f.name, "data-durable": f.durable ? "yes" : "no", "data-mode": honoredMode, "data-claim": f.mode !== "off" && f.honored ? f.claim : "" },
        el("td", {}, name), kind,
        el("td", { class: "num", "data-stat": "executions", text: st.executions || 0 }),
        el("td", { class: "num", "data-stat": "replays", text: st.replays || 0 }),
        el("td", { class: "num" + (st.errors ? " status failed" : ""), "data-stat": "errors", text: st.errors || 0 }),
        el("td", { class: "num nowrap", "data-stat": "claim", title: st.claimCount ? st.claimCount + " claims" : "", text: st.claimCount ? fmtMs(st.claimMeanMs) : "–" }));
      rows.push({ tr, f });
      tbody.append(tr);
    }
    labelCells(table);
    const none = el("p", { class: "muted", hidden: "", "data-no-flows": "", text: "No flow matches." });
    const apply = () => {
      const q = search.value.trim().toLowerCase();
      let n = 0;
      for (const { tr, f } of rows) {
        const d = tr.dataset;
        const ok = (!q || f.name.toLowerCase().includes(q)) && (!durable.value || d.durable === durable.value) &&
          (!mode.value || d.mode === mode.value) && (!claim.value || d.claim === claim.value);
        tr.hidden = !ok;
        if (ok) n++;
      }
      count.textContent = `${n} of ${rows.length} flows`;
      none.hidden = n > 0;
    };
    for (const i of [search, durable, mode, claim]) {
      i.addEventListener("input", apply);
      i.addEventListener("change", apply);
    }
    apply();
    main.append(table, none, el("p", { class: "muted", text: "Numbers: this process since it started, from its metrics (oke_flow_executions_total, oke_idempotency_outcomes_total, oke_unavailable_total, oke_idempotency_claim_seconds). Errors: 503s and keys refused (in progress, reused, invalid, missing)." }));
  }

  // --- runs ------------------------------------------------------------------

  const pageSize = 25;

  // toISO turns a datetime-local value into RFC 3339.
  function toISO(v) {
    if (!v) return "";
    const d = new Date(v);
    return isNaN(d) ? "" : d.toISOString();
  }

  function finished(r) {
    return r.status === "completed" || r.status === "failed" || r.status === "dead";
  }

  // runDuration: a finished run's creation to its end; an unfinished one's
  // time so far.
  function runDuration(r) {
    const t0 = Date.parse(r.createdAt);
    const t1 = finished(r) ? Date.parse(r.updatedAt) : Date.now();
    if (isNaN(t0) || isNaN(t1)) return "–";
    return (finished(r) ? "" : "≥ ") + fmtMs(Math.max(t1 - t0, 0));
  }

  // keyLink links to the idempotency row of a keyed request's run.
  function keyLink(k) {
    if (!k) return "";
    return el("a", { class: "mono", "data-link": "idempotency-row", href: "#/idempotency" + qs({ key: k.key, tenant: k.tenant, principal: k.principal, flow: k.flow }), title: `${k.tenant} · ${k.principal} · ${k.flow}`, text: k.key });
  }

  async function runsPage(params) {
    const f = {
      flow: params.get("flow") || "",
      status: params.get("status") || "",
      tenant: params.get("tenant") || "",
      from: params.get("from") || "",
      to: params.get("to") || "",
      before: params.get("before") || "",
    };
    const filterQuery = () => ({ flow: f.flow, status: f.status, tenant: f.tenant, createdAfter: toISO(f.from), createdBefore: toISO(f.to), order: "desc" });
    main.append(el("h1", { text: "Runs" }));

    const flowSel = el("select", { name: "flow", "data-input": "flow" }, el("option", { value: "", text: "any flow" }));
    api("GET", "flows").then((d) => {
      for (const fl of d.flows.filter((x) => x.durable)) {
        flowSel.append(el("option", { value: fl.name, text: fl.name, selected: fl.name === f.flow ? "selected" : false }));
      }
    }).catch(() => {});
    const statusSel = el("select", { name: "status", "data-input": "status" },
      ["", "running", "sleeping", "completed", "failed", "dead"].map((s) => el("option", { value: s, text: s || "any status", selected: s === f.status ? "selected" : false })));
    const tenant = el("input", { name: "tenant", placeholder: "any tenant", value: f.tenant, "data-input": "tenant" });
    const from = el("input", { type: "datetime-local", name: "from", value: f.from, step: "1", "data-input": "created-after" });
    const to = el("input", { type: "datetime-local", name: "to", value: f.to, step: "1", "data-input": "created-before" });
    const form = el("form", { class: "filters", onsubmit: (ev) => {
      ev.preventDefault();
      go("#/runs" + qs({ flow: flowSel.value, status: statusSel.value, tenant: tenant.value.trim(), from: from.value, to: to.value }));
    } },
    el("label", {}, "flow", flowSel), el("label", {}, "status", statusSel), el("label", {}, "tenant", tenant),
    el("label", {}, "created from", from), el("label", {}, "created before", to),
    el("button", { type: "submit", "data-action": "filter", text: "Filter" }),
    el("a", { href: "#/runs", text: "clear" }),
    el("a", { href: "#/runs" + qs({ status: "dead" }), "data-filter": "dead", title: "runs dead-lettered after too many failed pick-ups", text: "dead letters" }));
    main.append(form);

    const liveNote = el("span", { class: "live" });
    const batchOut = el("div", { "data-batch-result": "" });
    const tbody = el("tbody");
    const table = el("table", { "data-runs": "" }, el("thead", {}, el("tr", {},
      ["run", "flow", "status", "tenant", "pick-ups", "steps", "created", "duration", "key", "replay of", "last error"].map((h) => el("th", { text: h })))), tbody);
    const pager = el("div", { class: "pager" });
    let shown = [];
    const render = (page) => {
      shown = page.runs.map((r) => r.id);
      tbody.replaceChildren();
      if (!page.runs.length) tbody.append(el("tr", {}, el("td", { colspan: 11, class: "muted", text: "No runs match." })));
      for (const r of page.runs) {
        tbody.append(el("tr", { "data-run": r.id, "data-status": r.status },
          el("td", {}, el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(r.id), text: r.id })),
          el("td", { class: "mono", text: r.flow }),
          el("td", {}, statusEl(r.status)),
          el("td", { text: r.tenant || "" }),
          el("td", { class: "num", title: "times an execution picked the run up (a wake from a sleep is one)", text: r.attempts }),
          el("td", { class: "num", text: r.stepCount }),
          el("td", {}, timeEl(r.createdAt)),
          el("td", { class: "num nowrap", "data-duration": "", title: finished(r) ? "from its creation to its end" : "so far", text: runDuration(r) }),
          el("td", {}, keyLink(r.idemKey)),
          el("td", {}, r.replayOf ? el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(r.replayOf), text: r.replayOf }) : ""),
          el("td", { class: "muted", "data-run-error": "", title: r.error || "", text: r.error ? (r.error.length > 80 ? r.error.slice(0, 79) + "…" : r.error) : "" })));
      }
      labelCells(table);
      pager.replaceChildren();
      if (f.before) pager.append(el("a", { href: "#/runs" + qs({ flow: f.flow, status: f.status, tenant: f.tenant, from: f.from, to: f.to }), "data-action": "first-page", text: "⇤ newest" }));
      if (page.next) pager.append(el("a", { href: "#/runs" + qs({ flow: f.flow, status: f.status, tenant: f.tenant, from: f.from, to: f.to, before: page.next }), "data-action": "next-page", text: "older →" }));
      const n = shown.length + " run" + (shown.length === 1 ? "" : "s");
      replayAll.textContent = "Replay these " + n;
      cancelAll.textContent = "Cancel these " + n;
      resumeAll.textContent = "Resume these " + n;
      replayAll.dataset.count = cancelAll.dataset.count = resumeAll.dataset.count = shown.length;
      replayAll.disabled = cancelAll.disabled = !shown.length;
      resumeAll.disabled = !page.runs.some((r) => r.status === "dead");
    };
    // Batch actions on the runs shown — only once a filter narrows them —
    // each confirmed in a dialog that says how many runs it acts on.
    const filtered = !!(f.flow || f.status || f.tenant || f.from || f.to);
    const batch = (action, button) => {
      button.addEventListener("click", async () => {
        const ids = shown.slice();
        const what = { replay: "Replay", cancel: "Cancel", resume: "Resume" }[action];
        const warn = { replay: " Each runs again as a new run, its effects included.", cancel: " Each fails with 409 RunCancelled.", resume: " Each goes on from its last saved step." }[action];
        if (!await confirmDialog(`${what} these ${ids.length} run${ids.length === 1 ? "" : "s"}?${warn}`, `${what} ${ids.length}`)) return;
        shown = ids;
        button.disabled = true;
        batchOut.replaceChildren(el("div", { class: "notice", text: action + "ing " + shown.length + " runs…" }));
        try {
          const res = await api("POST", "runs/" + action, { ids: shown });
          const box = el("div", { class: res.failed ? "error" : "notice" },
            `${action}: ${res.done} done, ${res.failed} failed of ${res.selected}.`);
          const fails = res.results.filter((x) => x.error);
          if (fails.length) box.append(el("ul", {}, fails.map((x) => el("li", {}, el("span", { class: "mono", text: x.id }), " — " + x.error))));
          batchOut.replaceChildren(box);
        } catch (e) {
          batchOut.replaceChildren(errorBox(e));
        }
        button.disabled = false;
        load();
      });
    };
    const replayAll = el("button", { class: "secondary", "data-action": "batch-replay", text: "Replay these" });
    const cancelAll = el("button", { class: "danger", "data-action": "batch-cancel", text: "Cancel these" });
    batch("replay", replayAll);
    batch("cancel", cancelAll);
    // Dead-lettered runs (status dead) are resumed, not replayed: they go on
    // from their last saved step.
    const resumeAll = el("button", { class: "secondary", "data-action": "batch-resume", text: "Resume these" });
    batch("resume", resumeAll);
    const batchButtons = filtered ? [replayAll, cancelAll] : [el("span", { class: "muted", "data-batch-hint": "", text: "Filter the runs to act on them in bulk." })];
    if (filtered && f.status === "dead") batchButtons.unshift(resumeAll);
    main.append(el("div", { class: "actions" }, ...batchButtons, liveNote), batchOut, table, pager);

    const q = Object.assign(filterQuery(), { limit: pageSize, before: f.before });
    const load = async () => {
      try {
        render(await api("GET", "runs" + qs(q)));
      } catch (e) {
        main.append(errorBox(e));
      }
    };
    await load();
    if (!f.before) {
      // The first page follows the journal.
      liveNote.textContent = "● live";
      live("runs/events" + qs(q), "runs", render, (m) => { liveNote.textContent = "live updates stopped: " + m; });
    } else {
      liveNote.textContent = "";
    }
  }

  // --- one run ---------------------------------------------------------------

  async function runPage(id) {
    const head = el("h1", {}, "Run ", el("span", { class: "mono", text: id }));
    const notice = el("div", { "data-notice": "" });
    const body = el("div");
    main.append(head, notice, body);

    const act = async (what, fn) => {
      try {
        await fn();
      } catch (e) {
        notice.replaceChildren(errorBox(e));
      }
    };
    const replay = (from) => act("replay", async () => {
      const res = await api("POST", "runs/" + encodeURIComponent(id) + "/replay" + (from > 1 ? qs({ fromStep: from }) : ""));
      notice.replaceChildren(el("div", { class: "notice" },
        from > 1 ? `Replayed from step ${from} (steps 1–${from - 1} reused) as ` : "Replayed as ",
        el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(res.id), "data-replayed-run": res.id, text: res.id }), "."));
    });
    const cancel = () => act("cancel", async () => {
      if (!await confirmDialog(`Cancel run ${id}? It fails with 409 RunCancelled and runs no further step.`, "Cancel run")) return;
      await api("POST", "runs/" + encodeURIComponent(id) + "/cancel");
      notice.replaceChildren(el("div", { class: "notice", "data-cancelled": "", text: "Cancelled: the run failed with 409 RunCancelled." }));
    });

    const resume = () => act("resume", async () => {
      await api("POST", "runs/" + encodeURIComponent(id) + "/resume");
      notice.replaceChildren(el("div", { class: "notice", "data-resumed": "", text: "Resumed: the run is due again, its failed pick-ups and attempts reset; it goes on from its last saved step." }));
    });
    const signal = (name, data, key) => act("signal", async () => {
      let payload;
      if (data.trim() !== "") {
        try {
          payload = JSON.parse(data);
        } catch (e) {
          throw new APIError(0, "InvalidInput", "The payload must be JSON: " + e.message);
        }
      }
      await api("POST", "runs/" + encodeURIComponent(id) + "/signal", { name, data: payload, key: key || undefined });
      notice.replaceChildren(el("div", { class: "notice", "data-signalled": "", text: `Sent the signal "${name}".` }));
      signalData = signalKey = "";
    });

    // What the user typed survives a redraw (a live update).
    let fromValue = "";
    let signalName = "", signalData = "", signalKey = "";
    const render = (r) => {
      body.replaceChildren();
      const facts = el("dl", { class: "facts" });
      const fact = (k, ...v) => facts.append(el("dt", { text: k }), el("dd", {}, ...v));
      fact("flow", el("span", { class: "mono", text: r.flow }));
      fact("status", statusEl(r.status), r.status === "sleeping" && r.wakeAt ? " until " + fmtTime(r.wakeAt) : "");
      // Retries: the steps' own attempts beyond their first (a step's
      // Attempts counts its function's starts), and the next step's so far.
      // A wake from a sleep is a pick-up, not a retry.
      const retries = (r.steps || []).reduce((n, s) => n + Math.max((s.attempts || 0) - 1, 0), 0) +
        (r.next && r.status !== "sleeping" ? Math.max(r.next.attempts - 1, 0) : 0);
      fact("retries", el("span", { "data-retries": retries, text: retries === 0 ? "none" : String(retries) }),
        el("span", { class: "muted", text: ` · picked up ${r.attempts} time${r.attempts === 1 ? "" : "s"} (a start, a wake from a sleep or a signal, a retry or a pick-up after a lapse)` }));
      if (r.traceId) fact("trace", el("span", { class: "mono", "data-trace-id": r.traceId, text: r.traceId }));
      if (r.idemKey) fact("idempotency key", keyLink(r.idemKey), el("span", { class: "muted", text: ` (${r.idemKey.tenant} · ${r.idemKey.principal})` }));
      if (r.tenant || r.principal) fact("identity", [r.tenant, r.principal].filter(Boolean).join(" · "));
      fact("created", timeEl(r.createdAt));
      fact("updated", timeEl(r.updatedAt));
      fact("duration", el("span", { "data-duration": "", text: runDuration(r) }));
      if (r.owner) fact("held by", el("span", { class: "mono", text: r.owner }), r.leaseUntil ? ", lease until " + fmtTime(r.leaseUntil) : "");
      if (r.replayOf) fact("replay of", el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(r.replayOf), "data-link": "replay-of", text: r.replayOf }));
      if (r.replays && r.replays.length) {
        fact("replayed as", el("ul", { class: "plain", "data-replays": "" }, r.replays.map((x) =>
          el("li", {}, el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(x), "data-replay": x, text: x })))));
      }
      if (r.parent) fact("parent", el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(r.parent), text: r.parent }));
      if (r.event) fact("event", r.event);
      if (r.timing) {
        const t = r.timing;
        let waitText = `waiting ${fmtMs(t.waitMs)}`;
        if (r.status === "sleeping" && r.wakeAt) waitText = (t.waitMs ? waitText + " · " : "") + (r.waiting ? "waiting for signal " + r.waiting.signal : "sleeping") + " until " + fmtTime(r.waiting ? r.waiting.until : r.wakeAt);
        else if (!t.waitMs) waitText = "no waits";
        fact("time", `queued ${fmtMs(t.queueMs)} · steps ${fmtMs(t.runMs)} · ${waitText}` + (t.totalMs ? ` · total ${fmtMs(t.totalMs)}` : ""));
      }
      if (r.strikes) fact("failed pick-ups", el("span", { "data-strikes": r.strikes, text: r.strikes + " in a row" + (r.status === "dead" ? " — dead-lettered" : "") }));
      if (r.error && (r.status === "running" || r.status === "sleeping")) fact("last error", el("span", { class: "status failed", "data-last-error": "", text: r.error }));
      else if (r.error) fact("error", el("span", { class: "status failed", text: r.error }));
      fact("input", el("pre", { "data-input-json": "", text: json(r.input) || "(none)" }));
      if (r.result) {
        fact("result", `${r.result.status}${r.result.location ? " · Location " + r.result.location : ""}`, el("pre", { "data-result": "", text: json(r.result.body) }));
      }
      // Actions.
      const steps = r.steps || [];
      const fromStep = el("input", { type: "number", min: 1, max: steps.length + 1, value: fromValue || Math.min(2, steps.length + 1), "data-input": "from-step", class: "mono" });
      fromStep.style.width = "4.5rem";
      fromStep.addEventListener("input", () => { fromValue = fromStep.value; });
      fromStep.addEventListener("change", () => { fromValue = fromStep.value; });
      const actions = el("div", { class: "actions" },
        el("button", { "data-action": "replay", onclick: () => replay(1), text: "Replay" }),
        el("span", { class: "muted", text: "or replay from step" }), fromStep,
        el("button", { class: "secondary", "data-action": "replay-from", onclick: () => replay(parseInt(fromStep.value, 10) || 1), text: "Replay from step" }));
      if (r.status === "dead") {
        actions.append(el("button", { "data-action": "resume", onclick: resume, text: "Resume run" }));
      }
      if (r.status !== "completed" && r.status !== "failed") {
        actions.append(el("button", { class: "danger", "data-action": "cancel", onclick: cancel, text: "Cancel run" }));
      }
      if (r.waiting) fact("waiting for", "signal ", el("span", { class: "mono", "data-waiting": r.waiting.signal, text: r.waiting.signal }), " until " + fmtTime(r.waiting.until));
      body.append(el("section", { class: "card" }, facts, actions));
      if (r.status !== "completed" && r.status !== "failed") body.append(signalForm(r));
      if (r.signals && r.signals.length) body.append(signalList(r.signals));
      body.append(timeline(r));
    };

    // signalForm sends a signal to the run (POST runs/{id}/signal): its
    // name (the one the run waits for, when it waits), a JSON payload and
    // an optional dedupe key.
    const signalForm = (r) => {
      const track = (input, set) => {
        input.addEventListener("input", () => set(input.value));
        return input;
      };
      const name = track(el("input", { type: "text", "data-input": "signal-name", class: "mono", placeholder: "name",
        value: signalName || (r.waiting ? r.waiting.signal : "") }), (v) => { signalName = v; });
      const data = track(el("textarea", { "data-input": "signal-data", class: "mono", rows: 2, placeholder: "payload (JSON)" }), (v) => { signalData = v; });
      data.value = signalData;
      const key = track(el("input", { type: "text", "data-input": "signal-key", class: "mono", placeholder: "dedupe key (optional)", value: signalKey }), (v) => { signalKey = v; });
      const form = el("form", { class: "actions", "data-form": "signal" }, name, data, key,
        el("button", { type: "submit", "data-action": "signal", text: "Send signal" }));
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        if (!name.value.trim()) {
          notice.replaceChildren(errorBox(new APIError(0, "InvalidInput", "Name the signal to send.")));
          return;
        }
        signal(name.value.trim(), data.value, key.value.trim());
      });
      return el("section", { class: "card" }, el("h2", { text: "Send a signal" }),
        el("p", { class: "muted", text: r.waiting ? "The run waits for this signal: sending it wakes the run." :
          "A signal sent before the run waits for it is kept until it does." }), form);
    };

    // signalList shows the signals sent to the run, in send order.
    const signalList = (list) => {
      const rows = list.map((g) => el("tr", { "data-signal": g.seq },
        el("td", { class: "num", text: g.seq }), el("td", { class: "mono", text: g.name }), el("td", { class: "mono", text: g.key }),
        el("td", { text: fmtTime(g.sentAt) }), el("td", { text: g.step ? "step " + g.step : "waiting for a wait" }),
        el("td", {}, el("pre", { text: json(g.payload) }))));
      return el("section", { class: "card" }, el("h2", { text: "Signals" }),
        el("table", {}, el("thead", {}, el("tr", {}, ["#", "name", "key", "sent", "received by", "payload"].map((h) => el("th", { text: h })))),
          el("tbody", {}, rows)));
    };

    try {
      render(await api("GET", "runs/" + encodeURIComponent(id)));
    } catch (e) {
      body.append(errorBox(e));
      return;
    }
    live("runs/" + encodeURIComponent(id) + "/events", "run", render, () => {});
  }

  // timeline draws a run's saved steps as a waterfall: each step's bar from
  // its start to its end on one time axis, the wait before it as a thin
  // line, then the step the run takes next if it is unfinished.
  function timeline(r) {
    const steps = r.steps || [];
    const card = el("section", { class: "card" }, el("h2", { text: "Steps" }));
    if (!steps.length) card.append(el("p", { class: "muted", text: "No saved steps." }));
    const own = steps.filter((s) => !s.copied && s.startedAt);
    // A sleep's step saves its wake time as its result (an ISO time).
    const wakeOf = (s) => (typeof s.result === "string" && /^\d{4}-\d\d-\d\dT/.test(s.result) && !isNaN(Date.parse(s.result))) ? s.result : "";
    // A parked run (asleep, or waiting for a signal) draws its wait up to
    // its wake time.
    const parkedUntil = r.status === "sleeping" ? (r.waiting ? r.waiting.until : r.wakeAt) : "";
    const t0 = Math.min(Date.parse(r.createdAt), ...own.map((s) => Date.parse(s.startedAt)));
    let t1 = Math.max(t0 + 1, ...own.map((s) => Date.parse(s.finishedAt)));
    const lastEnd = t1;
    if (parkedUntil && !isNaN(Date.parse(parkedUntil))) t1 = Math.max(t1, Date.parse(parkedUntil));
    const span = t1 - t0;
    const list = el("ol", { class: "timeline" });
    let prevWake = "";
    for (const s of steps) {
      const track = el("div", { class: "track" });
      const wake = wakeOf(s);
      const wait = s.waitMs > 0 ? (prevWake ? "slept until " + fmtTime(prevWake) : "waited " + fmtMs(s.waitMs)) : "";
      if (!s.copied && s.startedAt) {
        const start = Date.parse(s.startedAt);
        if (s.waitMs > 0) {
          const gap = el("div", { class: "gap" + (prevWake ? " sleep" : ""), "data-gap": prevWake ? "sleep" : "wait", title: wait + " (" + fmtMs(s.waitMs) + ")" });
          gap.style.left = ((start - s.waitMs - t0) / span * 100) + "%";
          gap.style.width = (s.waitMs / span * 100) + "%";
          track.append(gap);
        }
        const bar = el("div", { class: "bar" + (s.failure ? " failed" : "") + (wake ? " sleep-step" : ""), title: fmtMs(s.ms) });
        bar.style.left = ((start - t0) / span * 100) + "%";
        bar.style.width = Math.max(s.ms / span * 100, 0.3) + "%";
        track.append(bar);
      } else if (s.copied) {
        const bar = el("div", { class: "bar copied", title: "reused from the run this one replays" });
        bar.style.left = "0";
        bar.style.width = "100%";
        track.append(bar);
      }
      const detail = el("details", { class: "detail" }, el("summary", { class: "muted", text: s.failure ? "failure" : "result" }),
        el("pre", { text: json(s.failure !== undefined ? s.failure : s.result) }),
        el("div", { class: "muted", text: `started ${fmtTime(s.startedAt)} · finished ${fmtTime(s.finishedAt)}` + (s.waitMs ? ` · ${wait || "waited " + fmtMs(s.waitMs)} before` : "") }));
      let about = s.copied ? "reused (replay)" : s.attempts > 1 ? `${s.attempts} attempts (${s.attempts - 1} retr${s.attempts === 2 ? "y" : "ies"})` : "1 attempt";
      if (wake) about = "sleep · wakes " + fmtTime(wake);
      list.append(el("li", { "data-step": s.seq, "data-concurrent": s.concurrent ? "" : undefined, "data-sleep-until": wake || undefined },
        el("span", { class: "seq", text: s.seq }),
        el("span", {}, el("span", { class: "mono", text: s.name }), el("div", { class: "muted", text: about + (s.concurrent ? " · at the same time (oke.Go)" : "") })),
        track,
        el("span", { class: "num", text: s.copied ? "–" : fmtMs(s.ms) }),
        detail));
      prevWake = wake && !s.copied ? wake : "";
    }
    if (r.next) {
      const tries = (n) => n <= 1 ? "" : ` · ${n - 1} retr${n === 2 ? "y" : "ies"} so far`;
      let what = "next" + tries(r.next.attempts);
      if (r.status === "dead") what = `dead-lettered · ${r.next.attempts} attempt${r.next.attempts === 1 ? "" : "s"} · resume it to go on`;
      else if (r.status === "sleeping" && r.waiting) what = `waiting for signal ${r.waiting.signal}, until ${fmtTime(r.waiting.until)} (in ${fmtMs(Math.max(Date.parse(r.waiting.until) - Date.now(), 0))})`;
      else if (r.status === "sleeping" && r.wakeAt) what = `sleeping until ${fmtTime(r.wakeAt)} (${Date.parse(r.wakeAt) > Date.now() ? "in " + fmtMs(Date.parse(r.wakeAt) - Date.now()) : "due"})`;
      else if (r.owner) what = "running now" + tries(r.next.attempts);
      else if (r.wakeAt) what = (r.error ? "waiting for its retry, not before " : "waiting to be picked up, not before ") + fmtTime(r.wakeAt);
      const nextWhat = el("span", { text: what });
      if (r.error && r.status !== "completed" && r.status !== "failed") nextWhat.append(el("div", { class: "muted", "data-next-error": "", text: "last error: " + r.error }));
      const track = el("div", { class: "track" });
      if (r.status === "sleeping" && parkedUntil && Date.parse(parkedUntil) > lastEnd) {
        const gap = el("div", { class: "gap sleep", "data-gap": r.waiting ? "signal" : "sleep", title: what });
        gap.style.left = ((lastEnd - t0) / span * 100) + "%";
        gap.style.width = ((Date.parse(parkedUntil) - lastEnd) / span * 100) + "%";
        track.append(gap);
      }
      list.append(el("li", { class: "next", "data-next-step": r.next.seq, "data-parked": r.status === "sleeping" ? (r.waiting ? "signal" : "sleep") : undefined },
        el("span", { class: "seq", text: r.next.seq }), nextWhat, track, el("span", { class: "num", text: parkedUntil ? "until " + fmtTime(parkedUntil).slice(11, 19) : "" })));
    }
    card.append(list);
    return card;
  }

  // --- idempotency rows --------------------------------------------------------

  async function rowsPage(params) {
    const p = { key: params.get("key") || "", tenant: params.get("tenant") || "", principal: params.get("principal") || "", flow: params.get("flow") || "" };
    // The listing's cursor (GET /idempotency's next: the last row's scope
    // and key), carried in the page's address.
    const after = { afterTenant: params.get("afterTenant") || "", afterPrincipal: params.get("afterPrincipal") || "", afterFlow: params.get("afterFlow") || "", afterKey: params.get("afterKey") || "" };
    const paged = params.has("afterKey");
    // The page size: rowsPageSize, or the address's limit (1 to 1000).
    const size = Math.min(Math.max(parseInt(params.get("limit"), 10) || rowsPageSize, 1), 1000);
    const sized = size !== rowsPageSize ? { limit: size } : {};
    main.append(el("h1", { text: "Idempotency rows" }));
    const key = el("input", { name: "key", placeholder: "Idempotency-Key", value: p.key, "data-input": "key", class: "mono", size: 40 });
    const tenant = el("input", { name: "tenant", placeholder: "any", value: p.tenant, "data-input": "tenant" });
    const principal = el("input", { name: "principal", placeholder: "any", value: p.principal, "data-input": "principal" });
    const flow = el("input", { name: "flow", placeholder: "any", value: p.flow, "data-input": "flow" });
    main.append(el("form", { class: "filters", onsubmit: (ev) => {
      ev.preventDefault();
      const f = { key: key.value, tenant: tenant.value.trim(), principal: principal.value.trim(), flow: flow.value.trim() };
      // At once, while the lookup runs: the rows shown narrow to those that
      // match (the lookup's page then replaces them), so no row that does
      // not match stays on screen beside one that does.
      if (f.key) {
        for (const tr of tbody.querySelectorAll("tr[data-row]")) {
          const d = tr.dataset;
          if (d.row !== f.key || (f.tenant && d.tenant !== f.tenant) || (f.principal && d.principal !== f.principal) || (f.flow && d.flowName !== f.flow)) tr.remove();
        }
      }
      go("#/idempotency" + qs(f));
    } }, el("label", {}, "key", key), el("label", {}, "tenant", tenant), el("label", {}, "principal", principal), el("label", {}, "flow", flow),
    el("button", { type: "submit", "data-action": "lookup", text: "Look up" }), el("a", { href: "#/idempotency", text: "all rows" })));

    const notice = el("div");
    const sweep = el("button", { class: "secondary", "data-action": "sweep", text: "Sweep expired rows", onclick: async () => {
      sweep.disabled = true;
      try {
        const res = await api("POST", "idempotency/sweep");
        notice.replaceChildren(el("div", { class: "notice", "data-swept": res.deleted, text: `Swept ${res.deleted} expired row${res.deleted === 1 ? "" : "s"} (${res.batches} batch${res.batches === 1 ? "" : "es"}).` }));
        load();
      } catch (e) {
        notice.replaceChildren(errorBox(e));
      }
      sweep.disabled = false;
    } });
    const tbody = el("tbody");
    const pager = el("div", { class: "pager" });
    main.append(el("div", { class: "actions" }, sweep, el("span", { class: "muted", text: "Stored bodies stay hidden until you reveal one." })), notice,
      el("table", { "data-rows": "" }, el("thead", {}, el("tr", {}, ["tenant", "principal", "flow", "key", "state", "status", "lease left", "TTL left", "run", "stored body", ""].map((h) => el("th", { text: h })))), tbody), pager);

    const load = async () => {
      let page;
      try {
        page = await api("GET", "idempotency" + qs(p.key ? p : Object.assign({ limit: size }, after)));
      } catch (e) {
        notice.replaceChildren(errorBox(e));
        return;
      }
      tbody.replaceChildren();
      if (!page.rows.length) tbody.append(el("tr", {}, el("td", { colspan: 11, class: "muted", text: p.key ? "No row has that key." : "No rows." })));
      for (const r of page.rows) tbody.append(rowEl(r, notice));
      labelCells(tbody.closest("table") || tbody.parentNode);
      pager.replaceChildren();
      if (!p.key && paged) pager.append(el("a", { href: "#/idempotency" + qs(sized), "data-action": "first-page", text: "⇤ first" }));
      if (!p.key && page.next) {
        const n = page.next;
        pager.append(el("a", { href: "#/idempotency" + qs(Object.assign({ afterTenant: n.tenant, afterPrincipal: n.principal, afterFlow: n.flow, afterKey: n.key }, sized)), "data-action": "next-page", text: "next →" }));
      }
      if (!p.key) pager.append(el("span", { class: "muted", "data-rows-shown": page.rows.length, text: `${page.rows.length} row${page.rows.length === 1 ? "" : "s"}` + (page.next ? ", more after" : "") }));
    };
    await load();
  }

  // rowsPageSize is how many idempotency rows a page of the listing shows.
  const rowsPageSize = 50;

  // rowId names an idempotency row by its whole scope.
  function rowId(r) {
    return JSON.stringify([r.tenant, r.principal, r.flow, r.key]);
  }

  // showBody shows a revealed body in the body cell of every drawing of
  // the row id: the page shown, and the one being drawn to take its place.
  function showBody(id, body) {
    for (const scope of new Set([document, main])) {
      for (const cell of scope.querySelectorAll("td[data-body-cell]")) {
        if (cell.dataset.bodyCell === id) cell.replaceChildren(el("pre", { "data-body": "", text: json(body) }));
      }
    }
  }

  // deleteButton deletes a row on one click (the console's markup contract:
  // data-action="delete" deletes the row). The harmful case is refused by
  // the server, not by a dialog: a row still in flight (409 RowInProgress)
  // is not deleted, and the button then turns into a second, explicit one
  // that says what forcing does; only that one, confirmed in the dialog,
  // sends force=1.
  function deleteButton(r, tr, notice) {
    let force = false;
    const button = el("button", { class: "danger", "data-action": "delete", text: "Delete" });
    button.addEventListener("click", async () => {
      if (force && !await confirmDialog(`Force the delete of the row of ${r.key}? It is still in flight: a second execution may start beside the running one.`, "Force delete")) return;
      button.disabled = true;
      try {
        const u = new URLSearchParams({ tenant: r.tenant, principal: r.principal, flow: r.flow, key: r.key });
        if (force) u.set("force", "1");
        await api("DELETE", "idempotency/row?" + u.toString());
        tr.remove();
        notice.replaceChildren(el("div", { class: "notice", "data-deleted": r.key }, "Deleted the row of ", el("span", { class: "mono", text: r.key }), ": the next request with this key runs as new."));
      } catch (e) {
        button.disabled = false;
        notice.replaceChildren(errorBox(e));
        if (e.code === "RowInProgress" && !force) {
          force = true;
          button.dataset.action = "force-delete";
          button.textContent = "Force delete: a second execution may start beside the running one";
        }
      }
    });
    return button;
  }

  function rowEl(r, notice) {
    const state = r.expired ? "expired" : r.state;
    const id = rowId(r);
    const bodyCell = el("td", { class: "body-cell", "data-body-cell": id });
    const tr = el("tr", { "data-row": r.key, "data-tenant": r.tenant, "data-principal": r.principal, "data-flow-name": r.flow, "data-state": state });
    if (r.bodyHidden && revealed.has(id)) {
      bodyCell.append(el("pre", { "data-body": "", text: json(revealed.get(id)) }));
    } else if (r.bodyHidden) {
      bodyCell.append(el("span", { class: "muted nowrap", "data-body-hidden": "", text: `hidden (${r.bodyBytes} bytes) ` }),
        el("button", { class: "secondary", "data-action": "reveal", text: "Reveal", onclick: async () => {
          try {
            // Every field set, even when empty: the row's whole scope.
            const u = new URLSearchParams({ tenant: r.tenant, principal: r.principal, flow: r.flow, key: r.key, reveal: "1" });
            const res = await api("GET", "idempotency/row?" + u.toString());
            const resp = res.row.response || {};
            revealed.set(id, resp.body);
            bodyCell.replaceChildren(el("pre", { "data-body": "", text: json(resp.body) }));
            showBody(id, resp.body);
          } catch (e) {
            notice.replaceChildren(errorBox(e));
          }
        } }));
    } else {
      bodyCell.append(el("span", { class: "muted", text: r.response && r.response.body !== undefined ? "" : "none" }));
      if (r.response && r.response.body !== undefined) bodyCell.append(el("pre", { "data-body": "", text: json(r.response.body) }));
    }
    tr.append(
      el("td", { text: r.tenant }), el("td", { class: "mono", text: r.principal }), el("td", { class: "mono", text: r.flow }),
      el("td", { class: "mono", text: r.key }),
      el("td", {}, el("span", { class: "status " + state, text: r.expired ? "expired (not yet swept)" : r.state })),
      el("td", { text: r.response ? r.response.status : "–" }),
      el("td", { class: "nowrap", text: r.leaseLeftMs !== undefined ? fmtMs(r.leaseLeftMs) : "–" }),
      el("td", { class: "nowrap", title: "expires " + fmtTime(r.expiresAt), text: r.expired ? "0" : fmtMs(r.ttlLeftMs) }),
      el("td", {}, r.runId ? el("a", { class: "mono", "data-link": "run", href: "#/runs/" + encodeURIComponent(r.runId), text: r.runId }) : "–"),
      bodyCell,
      el("td", {}, deleteButton(r, tr, notice)));
    return tr;
  }

  // --- schedules -------------------------------------------------------------

  // schedulesRefresh is how often the schedules page reads the API again.
  const schedulesRefresh = 5000;

  // fmtIn says how far ahead a time is, by this browser's clock.
  function fmtIn(s) {
    const d = new Date(s) - Date.now();
    if (isNaN(d)) return "";
    return d <= 0 ? "due" : "in " + fmtMs(d);
  }

  async function schedulesPage() {
    main.append(el("h1", { text: "Schedules" }));
    main.append(el("p", { class: "muted", text: "Flows bound with oke.Cron: one run per tick across every instance of the app. The last run is the run of the newest tick the journal holds." }));
    const tbody = el("tbody");
    const table = el("table", { "data-schedules": "" }, el("thead", {}, el("tr", {},
      ["flow", "spec", "zone", "catch-up", "next tick", "last tick", "last run", "status"].map((h) => el("th", { text: h })))), tbody);
    const render = (data) => {
      tbody.replaceChildren();
      if (!data.schedules.length) tbody.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "This app has no schedules." })));
      for (const s of data.schedules) {
        const last = s.last;
        tbody.append(el("tr", { "data-schedule": s.flow, "data-spec": s.spec, "data-next": s.next || "", "data-last-run": last ? last.runId : "", "data-last-status": last ? last.status : "" },
          el("td", {}, el("a", { class: "mono", href: "#/runs" + qs({ flow: s.flow }), text: s.flow })),
          el("td", { class: "mono", text: s.spec }),
          el("td", { text: s.location }),
          el("td", { text: s.catchUp }),
          el("td", {}, timeEl(s.next), el("div", { class: "muted", text: fmtIn(s.next) })),
          el("td", {}, last ? timeEl(last.tick) : "–"),
          el("td", {}, last ? el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(last.runId), text: last.runId }) : "–"),
          el("td", {}, last ? statusEl(last.status) : "")));
      }
      labelCells(table);
    };
    render(await api("GET", "schedules"));
    main.append(table);
    // Read again every few seconds while the page is shown: ticks come and
    // their runs finish.
    const note = el("span", { class: "live" });
    main.append(el("p", {}, note));
    const timer = setInterval(() => {
      api("GET", "schedules").then((d) => { render(d); note.textContent = ""; })
        .catch((e) => { note.textContent = "refresh failed: " + e.message; });
    }, schedulesRefresh);
    cleanup.push(() => clearInterval(timer));
  }

  window.addEventListener("hashchange", route);
  route();
})();
