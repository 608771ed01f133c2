// Reviewer page: pick an annotator's value per field or edit it with the field's widget (the
// same ones as the annotation workspace, static/fields/widgets.js), overlays per annotator,
// gold boxes drawn on the image, draft autosave, versioned save (409).
import { BoxCanvas } from "../annotation/boxes.js";
import { initWidgets, widgetOf } from "../fields/widgets.js";

const NS = "http://www.w3.org/2000/svg";
const DEBOUNCE_MS = 800;

const root = document.getElementById("review");
if (root) init(root);

function clone(v) {
  return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
}

function init(root) {
  const state = JSON.parse(root.dataset.state);
  const csrf = (() => {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch { return ""; }
  })();
  let version = state.version;
  let saveTimer = null;
  let saving = false;
  const statusEl = document.getElementById("save-status");
  const banner = document.getElementById("banner");
  const bannerText = document.getElementById("banner-text");
  const formError = document.getElementById("form-error");
  const note = document.getElementById("note");
  const itemTextEl = document.getElementById("item-text");
  const itemText = itemTextEl.textContent;
  const rows = [...document.querySelectorAll(".field-row")].map((tr) => {
    const w = tr.querySelector(".editor [data-widget]");
    return { tr, w, widget: widgetOf(w), name: tr.dataset.name };
  });
  const rowByName = Object.fromEntries(rows.map((r) => [r.name, r]));
  const valuesOf = (k) => state.annotators[k - 1].values;

  // Overlays: each annotator's boxes in their colour, toggleable.
  for (const svg of document.querySelectorAll("svg.overlay")) {
    const boxes = state.boxField ? valuesOf(Number(svg.dataset.k))[state.boxField] || [] : [];
    for (const [x1, y1, x2, y2] of boxes) {
      const r = document.createElementNS(NS, "rect");
      r.setAttribute("x", x1); r.setAttribute("y", y1);
      r.setAttribute("width", x2 - x1); r.setAttribute("height", y2 - y1);
      svg.appendChild(r);
    }
  }
  for (const t of document.querySelectorAll(".overlay-toggle")) {
    t.addEventListener("change", () => {
      const target = t.dataset.k === "gold" ? document.getElementById("box-canvas")
        : document.querySelector(`svg.overlay[data-k="${t.dataset.k}"]`);
      target.classList.toggle("hidden", !t.checked);
    });
  }

  // The gold canvas belongs to the region field's editor (its boxes widget draws on it), and is
  // enabled only while that field is being edited.
  const canvas = new BoxCanvas(document.getElementById("box-canvas"));
  const regionRow = state.boxField ? rowByName[state.boxField] : null;
  canvas.owner = regionRow ? regionRow.w : null;
  canvas.setEnabled(false);

  // Text selection in the item text, as offsets (the marks of the annotators' mentions split it).
  let lastSelection = null;
  document.addEventListener("selectionchange", () => {
    const sel = document.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return;
    const range = sel.getRangeAt(0);
    if (!itemTextEl.contains(range.startContainer) || !itemTextEl.contains(range.endContainer)) return;
    const pre = document.createRange();
    pre.selectNodeContents(itemTextEl);
    pre.setEnd(range.startContainer, range.startOffset);
    const start = pre.toString().length;
    lastSelection = { start, end: start + range.toString().length };
  });

  const ctx = {
    itemText,
    canvas,
    selection: () => lastSelection,
    valueOf: (name) => (rowByName[name] ? goldValue(rowByName[name]) : null),
    error: (w, msg) => showFieldError(rowByName[w.dataset.name], msg),
    canDraw: (w) => rowByName[w.dataset.name] && rowPick(rowByName[w.dataset.name]) === "edit",
  };

  function setStatus(text, cls = "") { statusEl.textContent = text; statusEl.className = `save-status ${cls}`; }
  function showBanner(text, cls) { banner.hidden = false; banner.className = `banner ${cls}`; bannerText.textContent = text; }
  function showFieldError(row, msg) {
    if (!row) return;
    const p = row.tr.querySelector(".field-error");
    p.hidden = !msg;
    p.textContent = msg || "";
  }

  function rowPick(row) {
    const checked = row.tr.querySelector(`input[name="pick-${CSS.escape(row.name)}"]:checked`);
    return checked ? checked.value : null;
  }

  // The gold value a row stands for right now: an annotator's, the identical one, or the edit.
  function goldValue(row) {
    const pick = rowPick(row);
    if (pick === "edit") return row.widget.read(row.w, ctx);
    if (pick === "identical") return clone(valuesOf(1)[row.name] ?? row.widget.absent());
    if (pick) return clone(valuesOf(Number(pick))[row.name] ?? row.widget.absent());
    return row.widget.absent();
  }

  function syncAll() {
    for (const row of rows) if (row.widget.sync) row.widget.sync(row.w, ctx);
    if (regionRow && rowPick(regionRow) !== "edit") {
      canvas.setEnabled(false);
      canvas.setBoxes(goldValue(regionRow));
    }
  }

  function refreshRow(row, { seedEditor = false } = {}) {
    const pick = rowPick(row);
    row.tr.querySelector(".editor").hidden = pick !== "edit";
    if (seedEditor && pick === "edit") {
      // Start editing from what was chosen before (or Annotator 1's value).
      const prev = row.tr.dataset.prevPick;
      const base = prev && prev !== "edit" && prev !== "identical" ? valuesOf(Number(prev)) : valuesOf(1);
      row.widget.write(row.w, clone(base[row.name] ?? row.widget.absent()), ctx);
    }
    row.tr.dataset.prevPick = pick || "";
  }

  function decisions() {
    const out = {};
    for (const row of rows) {
      const pick = rowPick(row);
      if (!pick || pick === "identical") continue;
      out[row.name] = pick === "edit" ? { value: row.widget.read(row.w, ctx) } : { pick: Number(pick) };
    }
    return out;
  }

  // Restore the draft.
  initWidgets(document.getElementById("review-form"), ctx);
  const draft = state.draft || {};
  for (const row of rows) {
    const d = (draft.decisions || {})[row.name];
    if (d && "pick" in d) {
      const r = row.tr.querySelector(`input[name="pick-${CSS.escape(row.name)}"][value="${d.pick}"]`);
      if (r) r.checked = true;
    } else if (d && "value" in d) {
      row.tr.querySelector('input[value="edit"]').checked = true;
      row.widget.write(row.w, d.value, ctx);
    }
    refreshRow(row);
  }
  syncAll();
  if (draft.note) note.value = draft.note;

  for (const row of rows) {
    for (const radio of row.tr.querySelectorAll(`input[name="pick-${CSS.escape(row.name)}"]`)) {
      radio.addEventListener("change", () => { refreshRow(row, { seedEditor: true }); syncAll(); changed(); });
    }
    row.w.addEventListener("input", () => { showFieldError(row, ""); syncAll(); changed(); });
  }
  note.addEventListener("input", () => changed());

  function changed() {
    setStatus("Unsaved changes", "warn");
    clearTimeout(saveTimer);
    saveTimer = setTimeout(saveDraft, DEBOUNCE_MS);
  }

  async function post(url, body) {
    const r = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body),
    });
    let data = {};
    try { data = await r.json(); } catch { /* not JSON: e.g. a login page after session expiry */ }
    return { status: r.status, data, redirected: r.redirected };
  }

  async function saveDraft() {
    if (saving) { changed(); return; }
    saving = true;
    try {
      const { status, data } = await post(root.dataset.draftUrl, { draft: { decisions: decisions(), note: note.value }, version });
      if (status === 200) { version = data.version; setStatus("Draft saved", "ok"); }
      else if (status === 409) { setStatus("Not saved", "bad"); showBanner(data.detail, "bad"); }
      else if (status === 403 || status === 401 || !data.version) { setStatus("Not saved", "bad"); showBanner("Your session ended or access changed: log in again in another tab, then save. Your edits stay on this page.", "bad"); }
      else { setStatus("Not saved", "bad"); }
    } catch {
      setStatus("Offline: not saved, retrying", "bad");
      saveTimer = setTimeout(saveDraft, 3000);
    } finally {
      saving = false;
    }
  }

  document.getElementById("review-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    clearTimeout(saveTimer);
    formError.hidden = true;
    for (const row of rows) showFieldError(row, "");
    const missing = rows.filter((r) => r.tr.dataset.mark !== "agree" && !rowPick(r));
    if (missing.length) {
      for (const r of missing) showFieldError(r, "Pick a value or edit it.");
      formError.hidden = false; formError.textContent = "Every field that differs needs a decision.";
      return;
    }
    let result;
    try {
      result = await post(root.dataset.decideUrl, { decisions: decisions(), note: note.value, version });
    } catch {
      formError.hidden = false; formError.textContent = "Network error: nothing was saved. Try again.";
      return;
    }
    const { status, data } = result;
    if (status === 200) { setStatus("Gold saved", "ok"); window.location.assign(data.next); return; }
    if (status === 409) { showBanner(data.detail, "bad"); return; }
    if (status === 400 && data.errors) {
      for (const [name, msg] of Object.entries(data.errors)) {
        const row = rowByName[name];
        const text = Array.isArray(msg) ? msg.join(" ") : String(msg);
        if (row) showFieldError(row, text);
        else { formError.hidden = false; formError.textContent = text; }
      }
      return;
    }
    formError.hidden = false;
    formError.textContent = data.detail || "Could not save (your session may have ended): log in again in another tab, then save.";
  });
  root.dataset.ready = "1";
}
