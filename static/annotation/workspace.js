// The annotation workspace: fields generated from the schema (each one a widget of
// static/fields/widgets.js), candidates, text-mention selection, boxes, autosave that never
// loses work, submit with version checks.
//
// Never losing work (issue 4, part 3):
// - every change is copied to localStorage at once, then autosaved after 800 ms of quiet;
// - a network error keeps the "unsaved" state visible and retries with backoff (1 s .. 30 s);
// - an expired session (401) or a changed one (403) stops autosave and says so; the copy in
//   this browser is offered back after logging in again;
// - a stale version (409) is never overwritten: the message says what happened.
import { BoxCanvas } from "./boxes.js";
import { initWidgets, widgetOf } from "../fields/widgets.js";

const DEBOUNCE_MS = 800;
const MAX_BACKOFF_MS = 30000;
const IDLE_MS = 60000; // no input for a minute: the time is not counted as active

const root = document.getElementById("workspace");
if (root) init(root);

function clone(v) {
  return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function init(root) {
  const state = JSON.parse(root.dataset.state);
  const candidates = JSON.parse(root.dataset.candidates || "{}");
  const cfg = {
    draftUrl: root.dataset.draftUrl,
    submitUrl: root.dataset.submitUrl,
    storageKey: root.dataset.storageKey,
    loginUrl: root.dataset.loginUrl,
    audit: root.dataset.mode === "audit",
  };
  const csrf = (() => {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch { return ""; }
  })();

  const form = document.getElementById("ann-form");
  const fieldset = document.getElementById("ann-fields");
  const itemTextEl = document.getElementById("item-text");
  const itemText = itemTextEl.textContent;
  const statusEl = document.getElementById("save-status");
  const badge = document.getElementById("status-badge");
  const banner = document.getElementById("ws-banner");
  const bannerText = document.getElementById("ws-banner-text");
  const bannerActions = document.getElementById("ws-banner-actions");
  const formError = document.getElementById("form-error");
  const live = document.getElementById("canvas-live");

  const fields = [...form.querySelectorAll(".field")].map((el) => {
    const w = el.querySelector("[data-widget]");
    return {
      el,
      w,
      widget: widgetOf(w),
      name: el.dataset.name,
      mention: el.hasAttribute("data-mention"),
      region: el.hasAttribute("data-region"),
      visField: el.dataset.visibleField || null,
      visIn: el.dataset.visibleIn ? el.dataset.visibleIn.split("|") : null,
    };
  });
  const byName = Object.fromEntries(fields.map((f) => [f.name, f]));

  let values = clone(state.values) || {};
  let provenance = clone(state.provenance) || {};
  let version = state.version;
  let status = state.status;
  let editable = state.editable;
  let dirty = false;
  let blocked = null; // "session" | "stale" | "closed": autosave stopped until reload
  let timer = null;
  let backoff = 0;
  let chain = Promise.resolve();

  // ---------------------------------------------------------------- active time
  // Time between two interactions counts when the gap is under a minute and the tab is visible.
  let activeMs = 0;
  let lastInput = performance.now();
  function tick() {
    const now = performance.now();
    if (document.visibilityState === "visible" && now - lastInput < IDLE_MS) activeMs += now - lastInput;
    lastInput = now;
  }
  for (const ev of ["pointerdown", "pointermove", "keydown", "wheel", "input", "scroll"]) {
    document.addEventListener(ev, tick, { passive: true, capture: true });
  }
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") { tick(); lastInput = -Infinity; } else { lastInput = performance.now(); }
  });

  // ---------------------------------------------------------------- boxes
  // The canvas belongs to the page (the image is not part of any field); the boxes widget of
  // the region field draws on it through ctx.canvas.
  const svg = document.getElementById("box-canvas");
  const canvas = new BoxCanvas(svg, { announce: (msg) => { live.textContent = msg; } });
  const stage = document.getElementById("stage");
  const unblur = document.getElementById("unblur");
  if (unblur) {
    const reveal = () => { stage.classList.remove("blurred"); unblur.remove(); syncWidgets(); };
    unblur.addEventListener("click", reveal);
  }
  function ownerField() {
    return fields.find((f) => f.w === canvas.owner) || null;
  }
  const addBox = document.getElementById("add-box");
  if (addBox) {
    addBox.addEventListener("click", () => {
      if (!canvas.enabled) { showFieldHint(); return; }
      canvas.add([400, 400, 600, 600]);
      svg.focus();
    });
  }
  function showFieldHint() {
    const f = ownerField();
    if (f && f.el.hidden && f.visField) {
      setStatus(`Boxes are only needed when ${labelOf(f.visField)} is ${f.visIn.join(" or ")}.`, "warn");
    }
  }
  svg.addEventListener("pointerdown", () => { if (!canvas.enabled) showFieldHint(); });

  // Zoom: the stage is scaled inside a scrolling viewport; boxes follow because they live in
  // the SVG's 0..1000 coordinates.
  let zoom = 1;
  const zoomLabel = document.getElementById("zoom-level");
  function setZoom(z) {
    zoom = Math.max(1, Math.min(4, z));
    stage.style.width = `${zoom * 100}%`;
    zoomLabel.textContent = `${Math.round(zoom * 100)}%`;
    canvas.render();
  }
  document.querySelectorAll("[data-zoom]").forEach((b) => b.addEventListener("click", () => {
    const how = b.dataset.zoom;
    setZoom(how === "in" ? zoom * 1.5 : how === "out" ? zoom / 1.5 : 1);
  }));
  svg.addEventListener("keydown", (e) => {
    if (e.key === "+" || e.key === "=") setZoom(zoom * 1.5);
    if (e.key === "-") setZoom(zoom / 1.5);
  });

  // ---------------------------------------------------------------- fields <-> values
  function labelOf(name) {
    const f = byName[name];
    const l = f && f.el.querySelector(".field-label");
    return l ? l.firstChild.textContent.trim() : name;
  }

  function absent(f) {
    return f.widget.absent();
  }
  function readField(f) {
    return f.widget.read(f.w, ctx);
  }
  function writeField(f, v) {
    f.widget.write(f.w, v, ctx);
    if (f.mention) highlightMention();
  }
  // Widgets whose display depends on other fields (checklist links, the canvas) refresh here.
  function syncWidgets() {
    for (const f of fields) if (f.widget.sync) f.widget.sync(f.w, ctx);
  }

  // What the widgets may ask of the page (static/fields/widgets.js).
  const ctx = {
    itemText,
    canvas,
    selection: () => lastSelection,
    valueOf: (name) => values[name],
    error: (w, msg) => showError(w.dataset.name, msg),
    canDraw: (w) => {
      const f = fields.find((x) => x.w === w);
      return Boolean(f) && !f.el.hidden && editable && !stage.classList.contains("blurred");
    },
  };

  // Conditional visibility (schema visible_if): a hidden field holds its absence value, so
  // "non-harmful" clears the target fields (Meme3W Appendix A.1 absence rules).
  function applyVisibility() {
    const visible = {};
    for (const f of fields) {
      let show = true;
      if (f.visField) show = Boolean(visible[f.visField]) && f.visIn.includes(values[f.visField]);
      visible[f.name] = show;
      f.el.hidden = !show;
      if (!show && !same(values[f.name] ?? absent(f), absent(f))) {
        values[f.name] = absent(f);
        writeField(f, values[f.name]);
      }
      if (!show) delete provenance[f.name];
    }
    document.querySelectorAll("[data-use-field]").forEach((b) => {
      const f = byName[b.dataset.useField];
      b.disabled = !editable || !f || !fieldUsable(f, visible);
    });
    document.querySelectorAll("[data-use-all]").forEach((b) => { b.disabled = !editable; });
    renderProvenance();
    syncWidgets();
  }

  function fieldUsable(f, visible) {
    return !f.visField || Boolean(visible[f.visField]) && f.visIn.includes(values[f.visField]);
  }

  function renderProvenance() {
    document.querySelectorAll("[data-prov-for]").forEach((span) => {
      const p = provenance[span.dataset.provFor];
      span.textContent = p ? `from candidate ${p.letter}${p.edited ? ", edited" : ""}` : "";
      span.classList.toggle("edited", Boolean(p && p.edited));
    });
  }

  function setValue(name, v, { fromLetter = null } = {}) {
    const f = byName[name];
    if (!f || !editable) return;
    values[name] = clone(v);
    if (fromLetter) {
      provenance[name] = { letter: fromLetter, edited: false };
    } else if (provenance[name]) {
      const cand = candidates[provenance[name].letter] || {};
      provenance[name].edited = !same(values[name], cand[name] ?? absent(f));
    }
    writeField(f, values[name]);
    clearError(name);
    applyVisibility();
    changed();
  }

  // DOM edits -> values: every widget reports a change with an "input" event from its root.
  form.addEventListener("input", (e) => {
    const fieldEl = e.target.closest(".field");
    if (!fieldEl || !editable) return;
    const f = byName[fieldEl.dataset.name];
    const v = readField(f);
    values[f.name] = v;
    if (provenance[f.name]) {
      const cand = candidates[provenance[f.name].letter] || {};
      provenance[f.name].edited = !same(v, cand[f.name] ?? absent(f));
    }
    if (f.mention) highlightMention();
    clearError(f.name);
    applyVisibility();
    changed();
  });
  form.addEventListener("change", (e) => {
    // radios fire change but not always input in older engines
    if (e.target.type === "radio") form.dispatchEvent(new Event("input", { bubbles: true }));
  });

  // ---------------------------------------------------------------- text mention
  // The mention is cut from the item text by character offsets of the selection, so it is an
  // exact copy (guideline 4) whatever the browser does with whitespace in toString().
  let lastSelection = null; // {start, end}: offsets into the item text
  document.addEventListener("selectionchange", () => {
    const sel = document.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return;
    const range = sel.getRangeAt(0);
    if (!itemTextEl.contains(range.startContainer) || !itemTextEl.contains(range.endContainer)) return;
    const pre = document.createRange();
    pre.selectNodeContents(itemTextEl);
    pre.setEnd(range.startContainer, range.startOffset);
    const start = pre.toString().length;
    const end = start + range.toString().length;
    lastSelection = end > start ? { start, end } : null;
  });

  function highlightMention() {
    const spanField = fields.find((f) => f.mention);
    const mention = spanField ? values[spanField.name] : null;
    const at = typeof mention === "string" && mention ? itemText.indexOf(mention) : -1;
    if (at < 0) {
      itemTextEl.replaceChildren(document.createTextNode(itemText));
      return;
    }
    const mark = document.createElement("mark");
    mark.textContent = mention;
    itemTextEl.replaceChildren(
      document.createTextNode(itemText.slice(0, at)), mark, document.createTextNode(itemText.slice(at + mention.length)),
    );
  }

  // ---------------------------------------------------------------- candidates
  document.querySelectorAll("[data-use-all]").forEach((b) => b.addEventListener("click", () => {
    const cand = candidates[b.dataset.useAll] || {};
    // Parents first (schema order), so that conditional fields see their parent's new value.
    for (const f of fields) {
      if (f.name in cand) {
        values[f.name] = clone(cand[f.name]);
        provenance[f.name] = { letter: b.dataset.useAll, edited: false };
        writeField(f, values[f.name]);
        clearError(f.name);
      }
    }
    applyVisibility();
    changed();
  }));
  document.querySelectorAll("[data-use-field]").forEach((b) => {
    b.addEventListener("click", () => {
      const cand = candidates[b.dataset.letter] || {};
      if (b.dataset.useField in cand) setValue(b.dataset.useField, cand[b.dataset.useField], { fromLetter: b.dataset.letter });
      canvas.preview([]);
    });
    if (b.hasAttribute("data-preview-boxes")) {
      const show = () => canvas.preview((candidates[b.dataset.letter] || {})[b.dataset.useField] || []);
      const hide = () => canvas.preview([]);
      b.addEventListener("mouseenter", show);
      b.addEventListener("focus", show);
      b.addEventListener("mouseleave", hide);
      b.addEventListener("blur", hide);
    }
  });

  // ---------------------------------------------------------------- errors, banners, status
  function showError(name, msg) {
    const p = document.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
    if (p) { p.textContent = msg; p.hidden = false; }
  }
  function clearError(name) {
    const p = document.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
    if (p) { p.textContent = ""; p.hidden = true; }
  }
  function showErrors(errors) {
    document.querySelectorAll("[data-error-for]").forEach((p) => { p.textContent = ""; p.hidden = true; });
    const general = [];
    for (const [name, msg] of Object.entries(errors || {})) {
      const text = Array.isArray(msg) ? msg.join(" ") : String(msg);
      if (byName[name]) showError(name, text);
      else general.push(text);
    }
    formError.textContent = general.join(" ");
    formError.hidden = general.length === 0;
    const first = document.querySelector("[data-error-for]:not([hidden])");
    if (first) first.closest(".field").scrollIntoView({ block: "center", behavior: "smooth" });
  }

  function setStatus(text, kind = "") {
    statusEl.textContent = text;
    statusEl.className = `save-status ${kind}`;
  }

  function showBanner(text, kind, actions = []) {
    bannerText.textContent = text;
    banner.className = `banner ${kind}`;
    banner.dataset.kind = kind;
    bannerActions.replaceChildren(...actions);
    banner.hidden = false;
  }
  function hideBanner() { banner.hidden = true; }

  function button(label, onClick, secondary = false) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    if (secondary) b.className = "secondary";
    b.addEventListener("click", onClick);
    return b;
  }
  function link(label, href) {
    const a = document.createElement("a");
    a.href = href; a.className = "button"; a.textContent = label;
    return a;
  }

  // ---------------------------------------------------------------- local copy
  function storeLocal() {
    try {
      localStorage.setItem(cfg.storageKey, JSON.stringify({
        values, provenance, version, dirty, savedAt: Date.now(),
      }));
    } catch { /* storage full or disabled: the server copy is all we have */ }
  }
  function dropLocal() {
    try { localStorage.removeItem(cfg.storageKey); } catch { /* ignore */ }
  }
  function readLocal() {
    try { return JSON.parse(localStorage.getItem(cfg.storageKey) || "null"); } catch { return null; }
  }

  // ---------------------------------------------------------------- saving
  function changed() {
    dirty = true;
    storeLocal();
    if (blocked) { reportBlocked(); return; }
    setStatus("Unsaved changes", "warn");
    clearTimeout(timer);
    timer = setTimeout(() => enqueue(saveDraft), DEBOUNCE_MS);
  }

  function enqueue(fn) {
    chain = chain.then(fn, fn);
    return chain;
  }

  function reportBlocked() {
    if (blocked === "session") setStatus("Not saved: session expired", "bad");
    else if (blocked === "stale") setStatus("Not saved: changed elsewhere", "bad");
    else if (blocked === "closed") setStatus("Not saved: item closed", "bad");
  }

  function payload() {
    tick();
    const delta = Math.round(activeMs);
    activeMs = 0;
    const prov = {};
    for (const [k, p] of Object.entries(provenance)) prov[k] = { letter: p.letter };
    return { delta, body: JSON.stringify({ values, version, provenance: prov, time_spent_ms: delta }) };
  }

  async function post(url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body,
    });
  }

  async function readJson(r) {
    try { return await r.json(); } catch { return {}; }
  }

  // Shared answers of draft and submit to an expired session, a stale version, a closed item.
  async function handleRefusal(r) {
    if (r.status === 401) {
      blocked = "session";
      reportBlocked();
      showBanner(
        "Your session has expired. Log in again; your changes are kept in this browser and will be offered back when you return.",
        "bad", [link("Log in again", cfg.loginUrl)],
      );
      return true;
    }
    if (r.status === 403) {
      // Logged in again elsewhere (new CSRF token) or lost the role: the page is out of date.
      blocked = "session";
      reportBlocked();
      const d = await readJson(r);
      showBanner(
        `${d.detail || "This page is out of date."} Reload the page; your changes are kept in this browser and will be offered back.`,
        "bad", [button("Reload", () => window.location.reload()), link("Log in again", cfg.loginUrl)],
      );
      return true;
    }
    if (r.status === 409) {
      const d = await readJson(r);
      if (d.code === "slot_taken") {
        showBanner(d.detail, "warn");
        return true;
      }
      blocked = d.code === "closed" ? "closed" : "stale";
      reportBlocked();
      showBanner(d.detail || "This annotation was changed elsewhere. Reload the page.", "bad",
        [button("Reload", () => window.location.reload())]);
      return true;
    }
    return false;
  }

  async function saveDraft() {
    clearTimeout(timer);
    if (!dirty || blocked || !editable) return;
    const snapshot = JSON.stringify(values);
    const { delta, body } = payload();
    setStatus("Saving…");
    let r;
    try {
      r = await post(cfg.draftUrl, body);
    } catch {
      activeMs += delta;
      retryLater("network error");
      return;
    }
    if (r.ok) {
      const d = await readJson(r);
      version = d.version;
      backoff = 0;
      if (JSON.stringify(values) === snapshot) dirty = false;
      storeLocal();
      setStatus(dirty ? "Unsaved changes" : `Saved ${new Date().toLocaleTimeString()}`, dirty ? "warn" : "ok");
      if (d.holds_slot === false) {
        showBanner("Your claim on this item expired and another annotator took its place. Your draft is saved, " +
          "but it cannot be submitted unless a place frees up.", "warn");
      } else if (banner.dataset.kind === "retry") {
        hideBanner();
      }
      if (dirty) timer = setTimeout(() => enqueue(saveDraft), DEBOUNCE_MS);
      return;
    }
    activeMs += delta;
    if (await handleRefusal(r)) return;
    if (r.status === 400) {
      const d = await readJson(r);
      showErrors(d.errors || {});
      setStatus(`Not saved: ${d.detail || "invalid value"}`, "bad");
      return;
    }
    retryLater(`server error ${r.status}`);
  }

  function retryLater(why) {
    backoff = backoff ? Math.min(MAX_BACKOFF_MS, backoff * 2) : 1000;
    setStatus(`Unsaved (${why}) — retrying in ${Math.round(backoff / 1000)} s`, "bad");
    showBanner("Your changes are not saved yet: the server cannot be reached. They are kept in this browser and saving is retried automatically.", "retry");
    clearTimeout(timer);
    timer = setTimeout(() => enqueue(saveDraft), backoff);
  }

  async function submit() {
    clearTimeout(timer);
    if (!editable) return;
    if (blocked === "session" || blocked === "closed") { reportBlocked(); return; }
    const { delta, body } = payload();
    const submitBtn = document.getElementById("submit-btn");
    if (submitBtn) submitBtn.disabled = true;
    setStatus("Submitting…");
    let r;
    try {
      r = await post(cfg.submitUrl, body);
    } catch {
      activeMs += delta;
      if (submitBtn) submitBtn.disabled = false;
      setStatus("Not submitted: the server cannot be reached. Try again.", "bad");
      return;
    } finally {
      if (submitBtn) submitBtn.disabled = false;
    }
    if (r.ok) {
      const d = await readJson(r);
      version = d.version;
      status = d.status;
      dirty = false;
      blocked = null;
      dropLocal();
      showErrors({});
      badge.textContent = "Submitted";
      if (submitBtn) submitBtn.textContent = "Submit revision";
      setStatus(`Submitted ${new Date().toLocaleTimeString()}`, "ok");
      const routed = d.routed ? " The item now has all its annotations and has moved on." : " You can revise it until the item goes to adjudication.";
      showBanner(`Submitted.${routed}`, "ok");
      if (d.routed) { editable = false; fieldset.disabled = true; if (submitBtn) submitBtn.remove(); syncWidgets(); }
      const skip = document.querySelector(".skip-card");
      if (skip) skip.remove();
      document.body.dispatchEvent(new CustomEvent("annotation-submitted", { bubbles: true }));
      return;
    }
    activeMs += delta;
    if (await handleRefusal(r)) return;
    const d = await readJson(r);
    showErrors(d.errors || {});
    setStatus(d.detail || "Not submitted", "bad");
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    enqueue(async () => {
      if (dirty && !blocked) await saveDraft();
      await submit();
    });
  });

  window.addEventListener("beforeunload", (e) => {
    // When saving is blocked (expired session, conflict) the banner already says the changes
    // are kept in this browser: no extra "leave page?" prompt on the way to the login page.
    if (dirty && editable && !blocked) {
      storeLocal();
      e.preventDefault();
      e.returnValue = "";
    }
  });

  // ---------------------------------------------------------------- start
  initWidgets(form, ctx);
  for (const f of fields) writeField(f, values[f.name] ?? absent(f));
  highlightMention();
  applyVisibility();
  if (!editable) {
    dropLocal();
    setStatus(status === "skipped" ? "Skipped" : "Read only");
  } else {
    setStatus(status === "submitted" ? "Submitted" : version ? "Saved" : "Not started", "ok");
    const local = readLocal();
    if (local && local.dirty && local.values && !same(local.values, values)) {
      const when = new Date(local.savedAt || Date.now()).toLocaleString();
      showBanner(`This browser kept changes from ${when} that were not saved to the server (for example because the session expired).`,
        "warn", [
          button("Restore them", () => {
            values = { ...values, ...local.values };
            provenance = local.provenance || {};
            for (const f of fields) writeField(f, values[f.name] ?? absent(f));
            highlightMention();
            applyVisibility();
            hideBanner();
            changed();
          }),
          button("Discard", () => { dropLocal(); hideBanner(); }, true),
        ]);
    } else if (local && !local.dirty) {
      dropLocal();
    }
  }
  if (!state.holds_slot && editable && status === "draft" && !cfg.audit) {
    showBanner("Your claim on this item expired and another annotator took its place. Your draft is kept and still saves, " +
      "but it cannot be submitted unless a place frees up.", "warn");
  }
  window.addEventListener("resize", () => canvas.render());
  root.classList.add("ready");
}
