// Reviewer page: pick an annotator's value per field or edit it with the field's widget (the
// same ones as the annotation workspace, static/fields/widgets.js), overlays per annotator,
// gold boxes drawn on the image, keys for everything (1/2/... per focused field, E edit, N/P,
// Ctrl+Enter, undo/redo, the "?" dialog), draft autosave, versioned save (409), next item.
import { BoxCanvas } from "../annotation/boxes.js";
import { imageFitter } from "../annotation/layout.js";
import { initWidgets, widgetOf } from "../fields/widgets.js";
import { announcer, isTyping, keysDialog } from "../fields/keys.js";

const NS = "http://www.w3.org/2000/svg";
const DEBOUNCE_MS = 800;
const UNDO_LIMIT = 200;
const COALESCE_MS = 1000;

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
  let saved = false;
  const form = document.getElementById("review-form");
  const statusEl = document.getElementById("save-status");
  const banner = document.getElementById("banner");
  const bannerText = document.getElementById("banner-text");
  const formError = document.getElementById("form-error");
  const note = document.getElementById("note");
  const itemTextEl = document.getElementById("item-text");
  const itemText = itemTextEl.textContent;
  const announce = announcer(document.getElementById("review-live"));
  const help = keysDialog(document.getElementById("keys-help"), document.getElementById("keys-button"));
  const rows = [...document.querySelectorAll(".field-row")].map((tr) => {
    const w = tr.querySelector(".editor [data-widget]");
    return { tr, w, widget: widgetOf(w), name: tr.dataset.name, head: tr.querySelector(".row-head") };
  });
  const rowByName = Object.fromEntries(rows.map((r) => [r.name, r]));
  const rowOf = (node) => {
    const tr = node && node.closest ? node.closest(".field-row") : null;
    return tr ? rowByName[tr.dataset.name] : null;
  };
  const valuesOf = (k) => state.annotators[k - 1].values;
  const annotators = state.annotators.length;

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
  const drawButton = document.getElementById("draw-mode");
  const svg = document.getElementById("box-canvas");
  const canvas = new BoxCanvas(svg, {
    announce,
    onMode: (mode) => { if (drawButton) drawButton.setAttribute("aria-pressed", mode === "draw" ? "true" : "false"); },
  });
  const regionRow = state.boxField ? rowByName[state.boxField] : null;
  canvas.owner = regionRow ? regionRow.w : null;
  canvas.setEnabled(false);
  if (drawButton) drawButton.addEventListener("click", () => { if (canvas.enabled) canvas.toggleMode(); });
  let pointerOnImage = false;
  const stage = document.getElementById("stage");
  stage.addEventListener("pointerenter", () => { pointerOnImage = true; });
  stage.addEventListener("pointerleave", () => { pointerOnImage = false; });
  const fitter = imageFitter({
    column: root.querySelector(".ws-left"), viewport: document.getElementById("viewport"), stage,
    image: document.getElementById("item-image"), onLayout: () => canvas.render(),
  });

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
    boxList: document.getElementById("box-list"),
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
  function setPick(row, value) {
    const radio = row.tr.querySelector(`input[name="pick-${CSS.escape(row.name)}"][value="${value}"]`);
    if (radio) radio.checked = true;
    return Boolean(radio);
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
    if (drawButton) drawButton.disabled = !canvas.enabled;
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

  // ---------------------------------------------------------------- the focused field
  let current = null;
  function setCurrent(row, { focus = true } = {}) {
    if (current) current.tr.classList.remove("current");
    current = row;
    if (!row) return;
    row.tr.classList.add("current");
    if (focus) {
      row.head.focus({ preventScroll: true });
      row.tr.scrollIntoView({ block: "nearest" });
    }
  }
  document.addEventListener("focusin", (e) => {
    const row = rowOf(e.target);
    if (row && row !== current) setCurrent(row, { focus: false });
  });
  const needsDecision = (row) => row.tr.dataset.mark !== "agree" && !rowPick(row);
  function nextRow(after, { undecided = false } = {}) {
    const from = after ? rows.indexOf(after) + 1 : 0;
    const rest = rows.slice(from);
    return (undecided ? rest.find(needsDecision) : rest[0]) || null;
  }
  function step(delta) {
    const at = current ? rows.indexOf(current) : -1;
    const row = rows[Math.max(0, Math.min(rows.length - 1, at + delta))];
    setCurrent(row);
    announce(row.head.querySelector("span").textContent);
  }
  function pick(row, value) {
    if (!row || !setPick(row, value)) return false;
    refreshRow(row, { seedEditor: value === "edit" });
    syncAll();
    changed({ name: row.name });
    if (value === "edit") {
      const input = row.w.querySelector("input:not([readonly]), textarea, select, button");
      if (input) input.focus();
      else row.head.focus();
    } else {
      announce(`${row.head.querySelector("span").textContent}: Annotator ${value}`);
      setCurrent(nextRow(row, { undecided: true }) || nextRow(row) || row);
    }
    return true;
  }

  // ---------------------------------------------------------------- undo / redo
  // A snapshot is every row's pick and edited value (boxes included) and the note.
  const undoStack = [];
  const redoStack = [];
  let lastState = null;
  let lastEdit = { name: null, at: 0 };
  function snapshot() {
    const picks = {};
    const edits = {};
    for (const row of rows) {
      picks[row.name] = rowPick(row);
      if (picks[row.name] === "edit") edits[row.name] = row.widget.read(row.w, ctx);
    }
    return JSON.stringify({ picks, edits });
  }
  function recordEdit(name, typing) {
    const now = snapshot();
    if (lastState === null || now === lastState) { lastState = now; return; }
    const t = performance.now();
    if (!(typing && lastEdit.name === name && t - lastEdit.at < COALESCE_MS)) {
      undoStack.push(lastState);
      if (undoStack.length > UNDO_LIMIT) undoStack.shift();
    }
    redoStack.length = 0;
    lastState = now;
    lastEdit = { name, at: t };
  }
  function restore(snap) {
    const d = JSON.parse(snap);
    for (const row of rows) {
      const p = d.picks[row.name];
      for (const r of row.tr.querySelectorAll(`input[name="pick-${CSS.escape(row.name)}"]`)) r.checked = r.value === p;
      if (p === "edit") row.widget.write(row.w, d.edits[row.name], ctx);
      refreshRow(row);
    }
    syncAll();
    lastState = snap;
    lastEdit = { name: null, at: 0 };
    changed({ record: false });
  }
  function undo() {
    if (!undoStack.length) { announce("Nothing to undo"); return; }
    redoStack.push(lastState);
    restore(undoStack.pop());
    announce("Undone");
  }
  function redo() {
    if (!redoStack.length) { announce("Nothing to redo"); return; }
    undoStack.push(lastState);
    restore(redoStack.pop());
    announce("Redone");
  }

  // Restore the draft.
  initWidgets(form, ctx);
  const draft = state.draft || {};
  for (const row of rows) {
    const d = (draft.decisions || {})[row.name];
    if (d && "pick" in d) {
      setPick(row, d.pick);
    } else if (d && "value" in d) {
      setPick(row, "edit");
      row.widget.write(row.w, d.value, ctx);
    }
    refreshRow(row);
  }
  syncAll();
  if (draft.note) note.value = draft.note;
  lastState = snapshot();

  for (const row of rows) {
    for (const radio of row.tr.querySelectorAll(`input[name="pick-${CSS.escape(row.name)}"]`)) {
      radio.addEventListener("change", () => { refreshRow(row, { seedEditor: true }); syncAll(); changed({ name: row.name }); });
    }
    row.w.addEventListener("input", (e) => {
      showFieldError(row, "");
      syncAll();
      changed({ name: row.name, typing: isTyping(e.target) });
    });
  }
  note.addEventListener("input", () => changed({ record: false }));

  // ---------------------------------------------------------------- the keyboard
  document.addEventListener("keydown", (e) => {
    if (e.defaultPrevented || help.isOpen()) return;
    const t = e.target;
    const ctrl = e.ctrlKey || e.metaKey;
    if (ctrl && e.key === "Enter") { e.preventDefault(); form.requestSubmit(); return; }
    if (isTyping(t)) {
      if (e.key === "Escape" && rowOf(t)) { e.preventDefault(); setCurrent(rowOf(t)); }
      return;
    }
    if (ctrl && !e.altKey && (e.key === "z" || e.key === "Z")) { e.preventDefault(); if (e.shiftKey) redo(); else undo(); return; }
    if (ctrl && !e.altKey && (e.key === "y" || e.key === "Y")) { e.preventDefault(); redo(); return; }
    if (ctrl || e.altKey) return;
    const key = e.key;
    const letter = key.length === 1 ? key.toUpperCase() : "";
    const row = current || rows[0];
    let done = true;
    if (key === "?") help.open();
    else if (/^[1-9]$/.test(key) && Number(key) <= annotators) done = pick(row, key);
    else if (letter === "E" && !e.shiftKey) done = pick(row, "edit");
    else if (letter === "N" && !e.shiftKey) step(1);
    else if (letter === "P" && !e.shiftKey) step(-1);
    else if (key === "Enter" && t === row.head) {
      if (rowPick(row) !== "edit") pick(row, "edit");
      else { const input = row.w.querySelector("input:not([readonly]), textarea, select, button"); if (input) input.focus(); }
    } else if (letter === "B" && !e.shiftKey && (canvas.enabled || pointerOnImage || t === svg)) {
      if (canvas.enabled) canvas.toggleMode(); else announce("Edit the region (E) to draw gold boxes.");
    } else if ((key === "Delete" || key === "Backspace") && canvas.enabled && canvas.selected >= 0) canvas.remove(canvas.selected);
    else if (key === "Escape") {
      if (canvas.mode === "draw") canvas.setMode("select");
      else if (canvas.selected >= 0) canvas.select(-1);
      else done = false;
    } else done = false;
    if (done) e.preventDefault();
  });

  // ---------------------------------------------------------------- saving
  function changed({ name = null, typing = false, record = true } = {}) {
    if (record) recordEdit(name, typing);
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
    if (saved) return;
    if (saving) { changed({ record: false }); return; }
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

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearTimeout(saveTimer);
    formError.hidden = true;
    for (const row of rows) showFieldError(row, "");
    const missing = rows.filter(needsDecision);
    if (missing.length) {
      for (const r of missing) showFieldError(r, "Pick a value or edit it.");
      formError.hidden = false; formError.textContent = "Every field that differs needs a decision.";
      setCurrent(missing[0]);
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
    if (status === 200) {
      saved = true;
      setStatus("Gold saved", "ok");
      // On to the next item (the adjudication page when none is waiting).
      const next = document.getElementById("review-next-form");
      if (next) next.submit(); else window.location.assign(data.next);
      return;
    }
    if (status === 409) { showBanner(data.detail, "bad"); return; }
    if (status === 400 && data.errors) {
      let first = null;
      for (const [name, msg] of Object.entries(data.errors)) {
        const row = rowByName[name];
        const text = Array.isArray(msg) ? msg.join(" ") : String(msg);
        if (row) { showFieldError(row, text); first = first || row; }
        else { formError.hidden = false; formError.textContent = text; }
      }
      if (first) setCurrent(first);
      return;
    }
    formError.hidden = false;
    formError.textContent = data.detail || "Could not save (your session may have ended): log in again in another tab, then save.";
  });

  fitter.layout();
  setCurrent(rows.find(needsDecision) || rows[0] || null, { focus: true });
  root.dataset.ready = "1";
}
