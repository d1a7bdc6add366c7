// fairq console: polls the admin API's overview about once a second and
// acts through the same API. Every request carries X-Fairq-Console: 1 and
// the HttpOnly session cookie; the script never sees the token. Data is
// put on the page as text (textContent), never as markup.
"use strict";
(() => {
  const API = "/admin/v1";
  const POLL_MS = 1000; // at most one poll a second
  const STALE_MS = 5000; // the status line turns red after this long without news
  const BATCH = 1000; // dead letters per redrive or purge call
  const HISTORY_MS = 10000; // the queues' histories gain a point every 10 s: fetched that often
  const HISTORY_SPAN_MS = 15 * 60000; // and hold the last 15 minutes
  const LIMITS = ["ingest_rate", "ingest_burst", "process_rate", "process_burst", "concurrency", "soft_backlog", "max_backlog", "drop_age"];

  const $ = (sel, root = document) => root.querySelector(sel);
  const SVG = "http://www.w3.org/2000/svg";

  // el makes an element: el("td", {class: "num"}, "text", child…).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === false || v == null) continue;
      if (k === "class") e.className = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    e.append(...kids.filter((k) => k != null));
    return e;
  }
  const setText = (node, s) => { if (node.textContent !== s) node.textContent = s; };

  // Problem is an answer other than success: the API's problem+json, or
  // a failure to reach it.
  class Problem extends Error {
    constructor(status, code, detail, requestID) {
      super(detail);
      Object.assign(this, { status, code, detail, requestID });
    }
    toString() {
      const head = this.status ? `${this.status} ${this.code}` : this.code;
      return `${head}: ${this.detail}` + (this.requestID ? ` (request ${this.requestID})` : "");
    }
  }

  async function api(method, path, body) {
    const init = { method, headers: { "X-Fairq-Console": "1", Accept: "application/json" }, credentials: "same-origin", cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(API + path, init);
    } catch (e) {
      throw new Problem(0, "unreachable", `the gateway cannot be reached (${e.message})`, "");
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: shown as text below */ }
    if (!res.ok) {
      const p = data && typeof data === "object" ? data : {};
      throw new Problem(res.status, p.code || "http_" + res.status, p.detail || text.trim().slice(0, 300) || res.statusText, p.request_id || "");
    }
    return data;
  }
  const enc = encodeURIComponent;

  // ---- formatting ----
  const dash = "–";
  function num(x) {
    if (x == null || Number.isNaN(x)) return dash;
    if (x === 0) return "0";
    const a = Math.abs(x);
    if (a < 10 && !Number.isInteger(x)) return x.toFixed(1);
    return Math.round(x).toLocaleString("en-US");
  }
  const total = (m) => (m ? Object.values(m).reduce((a, b) => a + b, 0) : undefined);
  function breakdown(m) {
    if (!m) return "";
    return Object.entries(m).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${num(v)}`).join(" · ");
  }
  function age(s) {
    if (s == null || Number.isNaN(s)) return dash;
    if (s < 1) return `${Math.round(s * 1000)} ms`;
    if (s < 120) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    if (s < 7200) return `${(s / 60).toFixed(1)} min`;
    return `${(s / 3600).toFixed(1)} h`;
  }
  const stateText = (t) => (t.state === "paused" ? (t.pause_ingest ? "paused + ingest" : "paused") : t.state || dash);

  // ---- the problem banner ----
  const banner = $("#problem");
  let bannerFrom = "";
  // showProblem shows err under a label; clearProblem(key) takes it away
  // when what failed (key, the label by default) later succeeds.
  function showProblem(label, err, key = label) {
    bannerFrom = key;
    banner.replaceChildren(`${label}: ${err instanceof Problem ? err.toString() : err}`);
    if (err instanceof Problem && err.status === 401) {
      banner.append(" ", el("a", { href: "/console/" }, "Log in again"));
    }
    banner.hidden = false;
  }
  function clearProblem(where) {
    if (bannerFrom === where) { banner.hidden = true; bannerFrom = ""; }
  }
  banner.addEventListener("click", (e) => { if (e.target === banner) { banner.hidden = true; bannerFrom = ""; } });

  // ---- keyed tables: rows are kept and updated in place, so that a
  // button under the pointer is the same button a second later ----
  function renderRows(tbody, items, keyOf, cols, rowClass) {
    const old = new Map();
    for (const tr of Array.from(tbody.rows)) old.set(tr.dataset.key, tr);
    items.forEach((it, i) => {
      const key = keyOf(it);
      let tr = old.get(key);
      if (tr) old.delete(key);
      else {
        tr = el("tr", { dataset: { key } }, ...cols.map((c) => el("td", { class: c.cls })));
      }
      cols.forEach((c, j) => c.fill(tr.cells[j], it));
      if (rowClass) {
        const cls = rowClass(it);
        if (tr.className !== cls) tr.className = cls;
      }
      if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null);
    });
    for (const tr of old.values()) tr.remove();
  }
  // fillOnce rebuilds a cell only when its signature changes.
  function fillOnce(td, sig, build) {
    if (td.dataset.sig === sig) return;
    td.dataset.sig = sig;
    td.replaceChildren(...build().filter((k) => k != null));
  }
  const textCol = (get, cls) => ({ cls, fill: (td, x) => setText(td, get(x)) });
  const withSub = (td, main, sub, title) => {
    fillOnce(td, main + "\u0000" + sub, () => [main, sub ? el("span", { class: "sub" }, sub) : null]);
    if (title !== undefined && td.title !== title) td.title = title;
  };

  // ---- state ----
  const state = {
    overview: null,
    history: new Map(), // queue name → its last 15 min, fetched every HISTORY_MS
    historyAt: 0,
    historyEnd: 0, // generated_at of the history
    lastOK: 0,
    sort: { key: "backlog", dir: -1 },
  };

  // ---- queues ----
  function sparkline(td, q) {
    let svg = td.firstChild;
    if (!svg) {
      svg = document.createElementNS(SVG, "svg");
      svg.setAttribute("class", "spark");
      svg.setAttribute("viewBox", "0 0 120 22");
      svg.setAttribute("preserveAspectRatio", "none");
      for (const cls of ["flight", "visible"]) {
        const p = document.createElementNS(SVG, "polyline");
        p.setAttribute("class", cls);
        svg.append(p);
      }
      svg.append(document.createElementNS(SVG, "title"));
      td.append(svg);
    }
    // The x axis is the last 15 minutes up to the history's reading, so
    // that a young process's line starts part of the way across.
    const h = state.history.get(q.name) || [];
    const end = state.historyEnd;
    const peak = Math.max(1, ...h.map((p) => Math.max(p.visible, p.not_visible)));
    const x = (p) => Math.max(0, 120 - ((end - Date.parse(p.at)) * 120) / HISTORY_SPAN_MS).toFixed(1);
    const pts = (f) => h.map((p) => `${x(p)},${(21 - (f(p) * 20) / peak).toFixed(1)}`).join(" ");
    svg.children[0].setAttribute("points", pts((p) => p.not_visible));
    svg.children[1].setAttribute("points", pts((p) => p.visible));
    setText(svg.children[2], h.length ? `visible (blue) and in flight (grey), peak ${peak}, ${h.length} points` : "no history");
  }
  const queueCols = [
    textCol((q) => q.name, "id"),
    textCol((q) => q.role),
    textCol((q) => num(q.visible), "num"),
    textCol((q) => num(q.not_visible), "num"),
    textCol((q) => num(q.delayed), "num"),
    { fill: sparkline },
  ];
  function renderQueues(o) {
    renderRows($("#queues tbody"), o.queues || [], (q) => q.name, queueCols, (q) => (q.role === "dlq" && q.visible > 0 ? "noisy" : ""));
    const dlq = o.dlq ? o.dlq.visible : undefined;
    setText($("#dlq-total"), dlq != null ? `· ${num(dlq)} dead letters` : "");
  }

  // ---- tenants ----
  const tenantCols = [
    { key: "id", label: "tenant", cls: "id", sort: (t) => t.id, fill: (td, t) => setText(td, t.id) },
    {
      key: "state", label: "state", sort: stateText,
      fill: (td, t) => fillOnce(td, stateText(t), () => [el("span", { class: `badge ${t.state}` }, stateText(t))]),
    },
    { key: "accepted", label: "accepted/s", cls: "num", sort: (t) => t.accepted_per_s, fill: (td, t) => setText(td, num(t.accepted_per_s)) },
    {
      key: "refused", label: "refused/s", cls: "num", sort: (t) => total(t.refused_per_s),
      fill: (td, t) => withSub(td, num(total(t.refused_per_s)), breakdown(t.refused_per_s)),
    },
    {
      key: "spilled", label: "spilled/s", cls: "num", sort: (t) => total(t.spilled_per_s),
      fill: (td, t) => withSub(td, num(total(t.spilled_per_s)), breakdown(t.spilled_per_s)),
    },
    { key: "backlog", label: "backlog", cls: "num", sort: (t) => t.backlog, fill: (td, t) => setText(td, num(t.backlog)) },
    {
      key: "in_flight", label: "in flight / concurrency", cls: "num", sort: (t) => t.in_flight,
      fill: (td, t) => {
        setText(td, `${num(t.in_flight)} / ${num(t.concurrency)}`);
        td.classList.toggle("over", t.in_flight != null && t.in_flight >= t.concurrency);
      },
    },
    {
      key: "process", label: "processed/s / limit", cls: "num", sort: (t) => t.process_rate,
      fill: (td, t) => setText(td, `${num(t.process_rate)} / ${num(t.process_rate_limit)}`),
    },
    {
      key: "age", label: "p95 age, 1st attempt", cls: "num", sort: (t) => t.age_first_attempt_p95_seconds,
      fill: (td, t) => setText(td, age(t.age_first_attempt_p95_seconds)),
    },
    {
      key: "noisy", label: "noisy", sort: (t) => (t.noisy ? 1 : 0),
      fill: (td, t) => fillOnce(td, t.noisy ? "1" + t.noisy_reason : "0",
        () => (t.noisy ? [el("span", { class: "badge noisy" }, "noisy"), el("span", { class: "sub" }, t.noisy_reason || "")] : [])),
    },
    { label: "", cls: "actions", fill: (td, t) => fillOnce(td, stateText(t), () => tenantActions(t)) },
  ];
  function tenantActions(t) {
    const b = (action, label, cls) => el("button", { type: "button", class: cls, dataset: { action, tenant: t.id } }, label);
    const out = [];
    if (t.state === "paused") out.push(b("resume", "Resume"));
    else out.push(b("pause", "Pause"));
    if (!t.pause_ingest) out.push(b("pause-ingest", "Pause ingest"));
    out.push(b("limits", "Limits…"), b("purge", "Purge…", "danger"));
    return out;
  }
  function buildTenantHead() {
    const tr = $("#tenants thead tr");
    tr.replaceChildren(...tenantCols.map((c) => el("th", { class: c.cls, dataset: c.key ? { sort: c.key } : {} }, c.label)));
    tr.addEventListener("click", (e) => {
      const th = e.target.closest("th[data-sort]");
      if (!th) return;
      const key = th.dataset.sort;
      state.sort = state.sort.key === key ? { key, dir: -state.sort.dir } : { key, dir: key === "id" || key === "state" ? 1 : -1 };
      if (state.overview) renderTenants(state.overview);
    });
  }
  function sortTenants(list) {
    const col = tenantCols.find((c) => c.key === state.sort.key) || tenantCols[0];
    const dir = state.sort.dir;
    return list.slice().sort((a, b) => {
      const x = col.sort(a), y = col.sort(b);
      if (x === y || (x == null && y == null)) return a.id < b.id ? -1 : 1;
      if (x == null) return 1;
      if (y == null) return -1;
      return (x < y ? -1 : 1) * dir;
    });
  }
  function renderTenants(o) {
    const list = o.tenants || [];
    for (const th of $("#tenants thead tr").cells) {
      const on = th.dataset.sort === state.sort.key;
      th.classList.toggle("sorted", on);
      th.classList.toggle("desc", on && state.sort.dir < 0);
    }
    renderRows($("#tenants tbody"), sortTenants(list), (t) => t.id, tenantCols,
      (t) => [t.noisy ? "noisy" : "", t.state === "paused" ? "paused" : ""].join(" ").trim());
    setText($("#tenant-count"), `· ${list.length}`);
    const ids = $("#tenant-ids");
    const sig = list.map((t) => t.id).join(",");
    if (ids.dataset.sig !== sig) {
      ids.dataset.sig = sig;
      ids.replaceChildren(...list.map((t) => el("option", { value: t.id })));
    }
  }

  // ---- shards ----
  function renderShards(o) {
    const list = (o.tenants || []).filter((t) => t.shard);
    const noisy = list.filter((t) => t.noisy);
    const sharing = (t) => {
      const mine = new Set(t.shard);
      return noisy.filter((n) => n.id !== t.id).map((n) => {
        const common = n.shard.filter((q) => mine.has(q));
        if (!common.length) return "";
        return common.length === mine.size ? `${n.id} (whole shard)` : `${n.id} (${common.join(", ")})`;
      }).filter(Boolean).join("; ");
    };
    const cols = [
      textCol((t) => t.id, "id"),
      textCol((t) => t.shard.join(", "), "mono"),
      textCol((t) => (t.noisy ? "noisy itself" : sharing(t))),
    ];
    renderRows($("#shards tbody"), list.slice().sort((a, b) => (a.id < b.id ? -1 : 1)), (t) => t.id, cols,
      (t) => (t.noisy ? "noisy" : sharing(t) ? "shares" : ""));
  }

  // ---- workers ----
  function renderWorkers(o) {
    const note = $("#workers-note");
    note.hidden = o.workers.length > 0;
    setText(note, "No worker has registered.");
    const at = Date.parse(o.generated_at) || Date.now();
    const cols = [
      textCol((w) => w.id, "id"),
      {
        cls: "num",
        fill: (td, w) => {
          setText(td, w.reporting === false ? "not reporting" : `${num(w.slots_in_use)} / ${num(w.slots)}`);
          td.classList.toggle("over", w.reporting === false || w.slots_in_use >= w.slots);
        },
      },
      textCol((w) => (w.reporting === false ? dash : num(w.messages_per_s)), "num"),
      {
        fill: (td, w) => {
          const since = (at - Date.parse(w.last_heartbeat)) / 1000;
          setText(td, Number.isNaN(since) ? dash : `${age(Math.max(0, since))} ago`);
          td.classList.toggle("over", since > 30);
          if (td.title !== w.last_heartbeat) td.title = w.last_heartbeat;
        },
      },
    ];
    renderRows($("#workers tbody"), o.workers, (w) => w.id, cols);
  }

  // ---- polling ----
  // refresh reads the overview: without the queues' histories but every
  // HISTORY_MS, when they have a new point.
  async function refresh() {
    const withHistory = Date.now() - state.historyAt >= HISTORY_MS;
    const o = await api("GET", withHistory ? "/overview" : "/overview?history=false");
    if (withHistory) {
      state.history = new Map(o.queues.map((q) => [q.name, q.history || []]));
      state.historyAt = Date.now();
      state.historyEnd = Date.parse(o.generated_at);
    }
    state.overview = o;
    state.lastOK = Date.now();
    const partial = $("#partial");
    partial.hidden = !o.partial;
    setText(partial, o.partial ? `Part of the overview could not be read: ${(o.problems || []).join("; ")}` : "");
    renderQueues(o);
    renderTenants(o);
    renderShards(o);
    renderWorkers(o);
  }

  let timer = 0, polling = false, again = false, stopped = false, failures = 0;
  async function poll() {
    timer = 0;
    if (stopped || document.hidden) return; // visibilitychange starts it again
    if (polling) { again = true; return; }
    polling = true;
    const started = Date.now();
    try {
      await refresh();
      failures = 0;
      clearProblem("refresh");
    } catch (e) {
      failures++;
      showProblem("refresh", e);
      if (e instanceof Problem && e.status === 401) stopped = true;
    }
    polling = false;
    status();
    if (stopped) return;
    if (again) { again = false; schedule(0); return; }
    const wait = failures ? Math.min(10000, POLL_MS * 2 ** failures) : POLL_MS;
    schedule(Math.max(0, wait - (Date.now() - started)));
  }
  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(poll, ms);
  }
  // kick polls now: after an action, so that its effect shows at once.
  const kick = () => schedule(0);
  function status() {
    const s = $("#status");
    if (stopped) { setText(s, "stopped: log in again"); s.classList.add("stale"); return; }
    if (!state.lastOK) { setText(s, failures ? "cannot read the overview" : "connecting…"); return; }
    const ago = Date.now() - state.lastOK;
    setText(s, `updated ${new Date(state.lastOK).toLocaleTimeString()}` + (ago > STALE_MS ? ` (${Math.round(ago / 1000)} s ago)` : ""));
    s.classList.toggle("stale", ago > STALE_MS);
  }
  document.addEventListener("visibilitychange", () => { if (!document.hidden) kick(); });
  setInterval(status, 1000);

  // ---- dialogs ----
  // confirm asks before an operation; with name, the operator types it.
  function confirm({ title, text, name, ok }) {
    const d = $("#confirm");
    setText($("#confirm-title"), title);
    setText($("#confirm-text"), text);
    setText($("#confirm-ok"), ok);
    const typed = $("#confirm-typed"), okButton = $("#confirm-ok");
    $("#confirm-typed-label").hidden = !name;
    setText($("#confirm-name"), name || "");
    typed.value = "";
    okButton.disabled = !!name;
    typed.oninput = () => { okButton.disabled = typed.value !== name; };
    d.returnValue = "";
    return new Promise((resolve) => {
      d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
      d.showModal();
      if (name) typed.focus();
    });
  }

  async function editLimits(id) {
    const t = await api("GET", `/tenants/${enc(id)}`);
    const d = $("#limits"), form = $("#limits-form"), problem = $("#limits-problem");
    setText($("#limits-tenant"), id);
    problem.hidden = true;
    for (const f of LIMITS) {
      const input = form.elements[f];
      const own = t.overrides ? t.overrides[f] : undefined;
      input.value = own == null ? "" : String(own);
      input.placeholder = t.limits && t.limits[f] != null ? String(t.limits[f]) : "";
    }
    form.onsubmit = async (e) => {
      if (!e.submitter || e.submitter.value !== "save") return; // cancel closes
      e.preventDefault();
      const body = {};
      for (const f of LIMITS) {
        const v = form.elements[f].value.trim();
        // Numbers as numbers; anything else as typed, for the API to
        // accept (drop_age) or to say why not.
        body[f] = v === "" ? null : f !== "drop_age" && v !== "" && !Number.isNaN(Number(v)) ? Number(v) : v;
      }
      $("#limits-save").disabled = true;
      try {
        await api("PUT", `/tenants/${enc(id)}`, body);
        d.close("saved");
        note(`limits of ${id} saved`);
        kick();
      } catch (err) {
        problem.hidden = false;
        setText(problem, err.toString());
      } finally {
        $("#limits-save").disabled = false;
      }
    };
    d.returnValue = "";
    d.showModal();
  }

  // note says what an action did, beside the status line, for a while.
  let noteTimer = 0;
  function note(s) {
    clearTimeout(noteTimer);
    setText($("#note"), s);
    noteTimer = setTimeout(() => setText($("#note"), ""), 10000);
  }

  // ---- tenant actions ----
  $("#tenants tbody").addEventListener("click", async (e) => {
    const btn = e.target.closest("button[data-action]");
    if (!btn) return;
    const { action, tenant: id } = btn.dataset;
    btn.disabled = true;
    try {
      switch (action) {
        case "pause":
          await api("POST", `/tenants/${enc(id)}/pause`, {});
          note(`${id} paused: workers start none of its messages`);
          break;
        case "pause-ingest":
          await api("POST", `/tenants/${enc(id)}/pause`, { pause_ingest: true });
          note(`${id} paused with its ingest: the gateway refuses its new messages (423)`);
          break;
        case "resume":
          await api("POST", `/tenants/${enc(id)}/resume`, {});
          note(`${id} resumed`);
          break;
        case "purge": {
          const ok = await confirm({
            title: `Purge tenant ${id}?`,
            text: `Every message of ${id} enqueued before now is deleted unseen, on every queue. This cannot be undone.`,
            name: id, ok: `Purge ${id}`,
          });
          if (!ok) break;
          const res = await api("POST", `/tenants/${enc(id)}/purge`);
          note(`${id} purged: messages enqueued before ${res.purged_before} are deleted as workers meet them`);
          break;
        }
        case "limits":
          await editLimits(id);
          break;
      }
      clearProblem("action");
      kick();
    } catch (err) {
      showProblem(`${action} ${id}`, err, "action");
    } finally {
      btn.disabled = false;
    }
  });

  // ---- dead letters ----
  const dlq = { cursor: null, peekedAt: 0, selected: new Set() };
  const peekForm = $("#dlq-peek");
  const dlqBody = $("#dlq tbody");
  const dlqNote = $("#dlq-note");

  function selectedChanged() {
    $("#dlq-redrive-selected").disabled = dlq.selected.size === 0;
    setText($("#dlq-redrive-selected"), dlq.selected.size ? `Redrive ${dlq.selected.size} selected` : "Redrive selected");
  }
  function letterRow(m) {
    const box = el("input", { type: "checkbox", "aria-label": `select ${m.id}`, dataset: { id: m.id } });
    return el("tr", { dataset: { key: m.id } },
      el("td", {}, box),
      el("td", { class: "id" }, m.id),
      el("td", { class: "id" }, m.tenant),
      el("td", { class: "num" }, String(m.attempts)),
      el("td", { class: "num", title: m.enqueued_at }, age(m.age_seconds)),
      el("td", { class: "id" }, m.queue),
      el("td", { class: "wrap" }, m.error || ""),
      el("td", {}, m.body == null ? "" : el("pre", { class: "body" }, m.body)));
  }
  async function peek(cursor) {
    const f = peekForm.elements;
    const q = new URLSearchParams();
    if (f.tenant.value.trim()) q.set("tenant", f.tenant.value.trim());
    q.set("limit", f.limit.value || "20");
    if (f.bodies.checked) q.set("bodies", "true");
    if (cursor) q.set("cursor", cursor);
    $("#dlq-peek-button").disabled = true;
    try {
      const at = Date.now();
      const res = await api("GET", `/dlq?${q}`);
      dlq.peekedAt = at;
      dlq.cursor = res.next_cursor;
      dlq.selected.clear();
      $("#dlq-all").checked = false;
      dlqBody.replaceChildren(...res.messages.map(letterRow));
      $("#dlq-next").disabled = !res.next_cursor;
      setText(dlqNote, res.messages.length ? `${res.messages.length} dead letters` + (res.next_cursor ? "; more on the next page" : "")
        : "No dead letters" + (q.get("tenant") ? ` of ${q.get("tenant")}` : "") + " to show.");
      selectedChanged();
      clearProblem("dead letters");
    } catch (err) {
      showProblem("dead letters", err);
    } finally {
      $("#dlq-peek-button").disabled = false;
    }
  }
  peekForm.addEventListener("submit", (e) => { e.preventDefault(); peek(null); });
  $("#dlq-next").addEventListener("click", () => peek(dlq.cursor));
  dlqBody.addEventListener("change", (e) => {
    const id = e.target.dataset.id;
    if (!id) return;
    if (e.target.checked) dlq.selected.add(id); else dlq.selected.delete(id);
    selectedChanged();
  });
  $("#dlq-all").addEventListener("change", (e) => {
    for (const box of dlqBody.querySelectorAll("input[data-id]")) {
      if (box.disabled) continue;
      box.checked = e.target.checked;
      if (box.checked) dlq.selected.add(box.dataset.id); else dlq.selected.delete(box.dataset.id);
    }
    selectedChanged();
  });

  // progress reports a long operation; done ends it.
  const progress = (s) => setText($("#dlq-progress"), s);
  const dlqCount = () => (state.overview && state.overview.dlq ? state.overview.dlq.visible : null);
  const filterTenant = () => peekForm.elements.tenant.value.trim();

  // A peek hides what it shows for a minute. The gateway that answered
  // the peek redrives those ids at once; behind a load balancer another
  // gateway finds only the dead letters it can see, so a redrive that
  // moved fewer than it named tries again every few seconds until that
  // minute is over, saying so.
  const PEEK_HIDE_MS = 60000;
  const RETRY_MS = 5000;
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  $("#dlq-redrive-selected").addEventListener("click", async (e) => {
    const ids = Array.from(dlq.selected); // one page: at most 100, as the API takes
    const visibleAt = dlq.peekedAt + PEEK_HIDE_MS;
    e.target.disabled = true;
    let moved = 0, failed = 0;
    try {
      for (;;) {
        const res = await api("POST", "/dlq/redrive", { ids });
        moved += res.moved;
        failed += res.failed || 0;
        if (moved + failed >= ids.length || Date.now() > visibleAt + RETRY_MS) break;
        progress(`moved ${moved} of ${ids.length}; the others are hidden by the peek until ${new Date(visibleAt).toLocaleTimeString()}: trying again…`);
        await sleep(RETRY_MS);
      }
      if (moved === ids.length) {
        for (const box of dlqBody.querySelectorAll("input[data-id]:checked")) {
          box.checked = false;
          box.disabled = true;
          box.closest("tr").classList.add("done");
        }
        dlq.selected.clear();
      }
      progress(`redrive: moved ${moved} of ${ids.length}` + (failed ? `, ${failed} could not be moved` : "") +
        (moved + failed < ids.length ? "; the others were not found (redriven or purged meanwhile?)" : ""));
      clearProblem("redrive");
      kick();
    } catch (err) {
      progress(moved ? `redrive: moved ${moved} of ${ids.length} before it failed` : "");
      showProblem("redrive", err);
    } finally {
      selectedChanged();
    }
  });

  // loop runs a bounded operation call after call while more remain,
  // saying how far it is.
  async function loop(verb, call) {
    let done = 0;
    const est = dlqCount();
    for (;;) {
      const n = await call();
      done += n.count;
      progress(`${verb} ${done}` + (est != null ? ` of ~${Math.max(est, done)}` : "") + "…");
      if (!n.more) return done;
    }
  }

  $("#dlq-redrive-all").addEventListener("click", async (e) => {
    const who = filterTenant();
    const n = dlqCount();
    const ok = await confirm({
      title: who ? `Redrive the dead letters of ${who}?` : "Redrive every dead letter?",
      text: (who ? `The dead letters of ${who}` : "Every dead letter") + (n != null ? ` (of ${n} in the queue)` : "") +
        " go back to their tenants' shards with their attempts reset.",
      ok: "Redrive",
    });
    if (!ok) return;
    e.target.disabled = true;
    try {
      let failed = 0;
      const moved = await loop("moved", async () => {
        const res = await api("POST", "/dlq/redrive", who ? { tenant: who, max: BATCH } : { max: BATCH });
        failed += res.failed || 0;
        return { count: res.moved, more: res.moved >= BATCH };
      });
      const hidden = Date.now() < dlq.peekedAt + PEEK_HIDE_MS;
      progress(`redrive done: moved ${moved}` + (failed ? `, ${failed} could not be moved (run it again)` : "") +
        (hidden ? `; those the last peek showed are hidden until ${new Date(dlq.peekedAt + PEEK_HIDE_MS).toLocaleTimeString()}: run it again then` : ""));
      clearProblem("redrive");
      kick();
    } catch (err) {
      progress("");
      showProblem("redrive", err);
    } finally {
      e.target.disabled = false;
    }
  });

  $("#dlq-purge").addEventListener("click", async (e) => {
    const who = filterTenant();
    const n = dlqCount();
    const ok = await confirm({
      title: who ? `Purge the dead letters of ${who}?` : `Purge all ${n != null ? n + " " : ""}dead letters?`,
      text: (who ? `The dead letters of ${who}` + (n != null ? ` (of ${n} in the queue)` : "") : `All ${n != null ? n + " " : ""}dead letters, of every tenant,`) +
        " are deleted for good.",
      name: who || "all", ok: "Purge",
    });
    if (!ok) return;
    e.target.disabled = true;
    try {
      const deleted = await loop("deleted", async () => {
        const q = new URLSearchParams({ max: String(BATCH) });
        if (who) q.set("tenant", who);
        const res = await api("DELETE", `/dlq?${q}`);
        return { count: res.deleted, more: res.remaining };
      });
      progress(`purge done: deleted ${deleted}`);
      clearProblem("purge");
      kick();
    } catch (err) {
      progress("");
      showProblem("purge", err);
    } finally {
      e.target.disabled = false;
    }
  });

  buildTenantHead();
  poll();
})();
