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

  function fmtTime(s) {
    if (!s) return "–";
    const d = new Date(s);
    if (isNaN(d) || d.getFullYear() < 2) return "–";
    return d.toLocaleString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
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
    if (!data.flows.length) main.append(el("p", { class: "muted", text: "This app binds no flows." }));
    for (const f of data.flows) {
      const title = el("h2", {}, el("span", { class: "mono", text: f.name }));
      if (f.pill) {
        title.append(el("span", { class: "pill " + f.mode, "data-pill": "idempotency", title: "Idempotency-Key: " + f.mode + ", stored responses kept " + f.ttl, text: f.pill }));
      }
      if (f.durable) title.append(el("span", { class: "pill durable", text: "durable" }));
      if (f.coalesced) title.append(el("span", { class: "pill durable", "data-pill": "coalesced", title: "Every step's writes are statements in the run's one transaction (oke extract proved it): a keyed request commits once, its steps, journal and answer together", text: "one commit" }));
      if (f.contract && f.contract !== "fresh") title.append(el("span", { class: "pill " + f.contract, title: f.contractProblem || "", text: "contract " + f.contract }));
      const facts = el("dl", { class: "facts" });
      const fact = (k, ...v) => facts.append(el("dt", { text: k }), el("dd", {}, ...v));
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
      if (f.source) fact("source", el("span", { class: "mono", text: f.source }));
      const card = el("section", { class: "card", "data-flow": f.name }, title);
      if (f.description) card.append(el("p", { text: f.description }));
      card.append(facts);
      main.append(card);
    }
  }

  // --- runs ------------------------------------------------------------------

  const pageSize = 25;

  // toISO turns a datetime-local value into RFC 3339.
  function toISO(v) {
    if (!v) return "";
    const d = new Date(v);
    return isNaN(d) ? "" : d.toISOString();
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
      ["run", "flow", "status", "tenant", "attempts", "steps", "created", "replay of", "last error"].map((h) => el("th", { text: h })))), tbody);
    const pager = el("div", { class: "pager" });
    let shown = [];
    const render = (page) => {
      shown = page.runs.map((r) => r.id);
      tbody.replaceChildren();
      if (!page.runs.length) tbody.append(el("tr", {}, el("td", { colspan: 9, class: "muted", text: "No runs match." })));
      for (const r of page.runs) {
        tbody.append(el("tr", { "data-run": r.id, "data-status": r.status },
          el("td", {}, el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(r.id), text: r.id })),
          el("td", { class: "mono", text: r.flow }),
          el("td", {}, statusEl(r.status)),
          el("td", { text: r.tenant || "" }),
          el("td", { class: "num", text: r.attempts }),
          el("td", { class: "num", text: r.stepCount }),
          el("td", { text: fmtTime(r.createdAt) }),
          el("td", {}, r.replayOf ? el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(r.replayOf), text: r.replayOf }) : ""),
          el("td", { class: "muted", "data-run-error": "", title: r.error || "", text: r.error ? (r.error.length > 80 ? r.error.slice(0, 79) + "…" : r.error) : "" })));
      }
      pager.replaceChildren();
      if (f.before) pager.append(el("a", { href: "#/runs" + qs({ flow: f.flow, status: f.status, tenant: f.tenant, from: f.from, to: f.to }), "data-action": "first-page", text: "⇤ newest" }));
      if (page.next) pager.append(el("a", { href: "#/runs" + qs({ flow: f.flow, status: f.status, tenant: f.tenant, from: f.from, to: f.to, before: page.next }), "data-action": "next-page", text: "older →" }));
      replayAll.textContent = "Replay these " + shown.length;
      cancelAll.textContent = "Cancel these " + shown.length;
      resumeAll.textContent = "Resume these " + shown.length;
      replayAll.disabled = cancelAll.disabled = !shown.length;
      resumeAll.disabled = !page.runs.some((r) => r.status === "dead");
    };
    // Batch actions on the runs shown, each confirmed by a second click.
    const batch = (action, button) => {
      let armed = false;
      button.addEventListener("click", async () => {
        if (!armed) {
          armed = true;
          button.textContent = "Click again to " + action + " " + shown.length + " runs";
          return;
        }
        armed = false;
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
    const batchButtons = [replayAll, cancelAll];
    if (f.status === "dead") batchButtons.unshift(resumeAll);
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
      fact("attempts", String(r.attempts) + " pick-up" + (r.attempts === 1 ? "" : "s"));
      if (r.tenant || r.principal) fact("identity", [r.tenant, r.principal].filter(Boolean).join(" · "));
      fact("created", fmtTime(r.createdAt));
      fact("updated", fmtTime(r.updatedAt));
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
        fact("time", `queued ${fmtMs(t.queueMs)} · steps ${fmtMs(t.runMs)} · waiting ${fmtMs(t.waitMs)}` + (t.totalMs ? ` · total ${fmtMs(t.totalMs)}` : ""));
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
    const t0 = Math.min(Date.parse(r.createdAt), ...own.map((s) => Date.parse(s.startedAt)));
    const t1 = Math.max(t0 + 1, ...own.map((s) => Date.parse(s.finishedAt)));
    const span = t1 - t0;
    const list = el("ol", { class: "timeline" });
    for (const s of steps) {
      const track = el("div", { class: "track" });
      if (!s.copied && s.startedAt) {
        const start = Date.parse(s.startedAt);
        if (s.waitMs > 0) {
          const gap = el("div", { class: "gap", title: "waited " + fmtMs(s.waitMs) });
          gap.style.left = ((start - s.waitMs - t0) / span * 100) + "%";
          gap.style.width = (s.waitMs / span * 100) + "%";
          track.append(gap);
        }
        const bar = el("div", { class: "bar" + (s.failure ? " failed" : ""), title: fmtMs(s.ms) });
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
        el("div", { class: "muted", text: `started ${fmtTime(s.startedAt)} · finished ${fmtTime(s.finishedAt)}` + (s.waitMs ? ` · waited ${fmtMs(s.waitMs)} before` : "") }));
      list.append(el("li", { "data-step": s.seq, "data-concurrent": s.concurrent ? "" : undefined },
        el("span", { class: "seq", text: s.seq }),
        el("span", {}, el("span", { class: "mono", text: s.name }), el("div", { class: "muted", text: (s.copied ? "reused (replay)" : `${s.attempts} attempt${s.attempts === 1 ? "" : "s"}`) + (s.concurrent ? " · at the same time (oke.Go)" : "") })),
        track,
        el("span", { class: "num", text: s.copied ? "–" : fmtMs(s.ms) }),
        detail));
    }
    if (r.next) {
      let what = `next · ${r.next.attempts} attempt${r.next.attempts === 1 ? "" : "s"} so far`;
      if (r.status === "dead") what = `dead-lettered · ${r.next.attempts} attempt${r.next.attempts === 1 ? "" : "s"} · resume it to go on`;
      else if (r.status === "sleeping" && r.wakeAt) what = "sleeping until " + fmtTime(r.wakeAt);
      else if (r.owner) what = "running now (" + r.next.attempts + (r.next.attempts === 1 ? " attempt)" : " attempts)");
      else if (r.wakeAt) what = (r.error ? "waiting for its retry, not before " : "waiting to be picked up, not before ") + fmtTime(r.wakeAt);
      const nextWhat = el("span", { text: what });
      if (r.error && r.status !== "completed" && r.status !== "failed") nextWhat.append(el("div", { class: "muted", "data-next-error": "", text: "last error: " + r.error }));
      list.append(el("li", { class: "next", "data-next-step": r.next.seq }, el("span", { class: "seq", text: r.next.seq }), nextWhat, el("span"), el("span")));
    }
    card.append(list);
    return card;
  }

  // --- idempotency rows --------------------------------------------------------

  async function rowsPage(params) {
    const p = { key: params.get("key") || "", tenant: params.get("tenant") || "", principal: params.get("principal") || "", flow: params.get("flow") || "" };
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
    main.append(el("div", { class: "actions" }, sweep, el("span", { class: "muted", text: "Stored bodies stay hidden until you reveal one." })), notice,
      el("table", { "data-rows": "" }, el("thead", {}, el("tr", {}, ["tenant", "principal", "flow", "key", "state", "status", "lease left", "TTL left", "run", "stored body", ""].map((h) => el("th", { text: h })))), tbody));

    const load = async () => {
      let page;
      try {
        page = await api("GET", "idempotency" + qs(p.key ? p : { limit: 100 }));
      } catch (e) {
        notice.replaceChildren(errorBox(e));
        return;
      }
      tbody.replaceChildren();
      if (!page.rows.length) tbody.append(el("tr", {}, el("td", { colspan: 11, class: "muted", text: p.key ? "No row has that key." : "No rows." })));
      for (const r of page.rows) tbody.append(rowEl(r, notice));
    };
    await load();
  }

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

  // deleteButton deletes a row. A row still in flight (409 RowInProgress)
  // is not deleted: the button then turns into a second, explicit one that
  // says what forcing does, and only a click on it sends force=1.
  function deleteButton(r, tr, notice) {
    let force = false;
    const button = el("button", { class: "danger", "data-action": "delete", text: "Delete" });
    button.addEventListener("click", async () => {
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
    const bodyCell = el("td", { "data-body-cell": id });
    const tr = el("tr", { "data-row": r.key, "data-tenant": r.tenant, "data-principal": r.principal, "data-flow-name": r.flow, "data-state": state });
    if (r.bodyHidden && revealed.has(id)) {
      bodyCell.append(el("pre", { "data-body": "", text: json(revealed.get(id)) }));
    } else if (r.bodyHidden) {
      bodyCell.append(el("span", { class: "muted", "data-body-hidden": "", text: `hidden (${r.bodyBytes} bytes) ` }),
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
      el("td", { text: r.leaseLeftMs !== undefined ? fmtMs(r.leaseLeftMs) : "–" }),
      el("td", { text: r.expired ? "0" : fmtMs(r.ttlLeftMs) }),
      el("td", {}, r.runId ? el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(r.runId), text: r.runId }) : "–"),
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
          el("td", {}, fmtTime(s.next), el("div", { class: "muted", text: fmtIn(s.next) })),
          el("td", { text: last ? fmtTime(last.tick) : "–" }),
          el("td", {}, last ? el("a", { class: "mono", href: "#/runs/" + encodeURIComponent(last.runId), text: last.runId }) : "–"),
          el("td", {}, last ? statusEl(last.status) : "")));
      }
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
