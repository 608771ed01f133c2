// The annotation (and blind audit) workspace: fields generated from the schema (each one a widget
// of static/fields/widgets.js), candidates, the text mention, boxes on the image, a keyboard for
// everything (the "?" dialog lists it), undo/redo, autosave that never loses work, submit with
// version checks and, if the annotator wants it, the next item right after.
//
// Never losing work (issue 4, part 3):
// - every change is copied to localStorage at once, then autosaved after 800 ms of quiet;
// - a network error keeps the "unsaved" state visible and retries with backoff (1 s .. 30 s);
// - an expired session (401) or a changed one (403) stops autosave and says so; the copy in
//   this browser is offered back after logging in again, saying why it was left unsaved;
// - a stale version (409) is never overwritten: the message says what happened.
//
// Blindness: the page knows the annotator's own annotation and the anonymized candidates only.
// The submit answer says nothing about the item's route; "next item" is a separate request.
import { BoxCanvas } from "./boxes.js";
import { imageFitter } from "./layout.js";
import { initWidgets, widgetOf, wordSpans } from "../fields/widgets.js";
import { announcer, isTyping, keysDialog } from "../fields/keys.js";

const DEBOUNCE_MS = 800;
const MAX_BACKOFF_MS = 30000;
const IDLE_MS = 60000; // no input for a minute: the time is not counted as active
const COALESCE_MS = 1000; // typing in one field within this time is one undo step
const UNDO_LIMIT = 200;

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
  const letters = Object.keys(candidates).sort();
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
  const announce = announcer(document.getElementById("canvas-live"));
  const help = keysDialog(document.getElementById("keys-help"), document.getElementById("keys-button"));

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
  const fieldOf = (node) => {
    const el = node && node.closest ? node.closest("#ann-form .field") : null;
    return el ? byName[el.dataset.name] : null;
  };

  let values = clone(state.values) || {};
  let provenance = clone(state.provenance) || {};
  let version = state.version;
  let status = state.status;
  let editable = state.editable;
  let dirty = false;
  let blocked = null; // "session" | "stale" | "closed": autosave stopped until reload
  let offline = false; // the last save failed for want of a server
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

  // ---------------------------------------------------------------- image, canvas, layout
  // The canvas belongs to the page (the image is not part of any field); the boxes widget of
  // the region field draws on it through ctx.canvas.
  const svg = document.getElementById("box-canvas");
  const stage = document.getElementById("stage");
  const viewport = document.getElementById("viewport");
  const image = document.getElementById("item-image");
  const leftCol = root.querySelector(".ws-left");
  const drawButton = document.getElementById("draw-mode");
  const hint = document.getElementById("canvas-hint");
  const canvas = new BoxCanvas(svg, {
    announce,
    onMode: (mode) => { if (drawButton) drawButton.setAttribute("aria-pressed", mode === "draw" ? "true" : "false"); },
  });
  let pointerOnImage = false;
  stage.addEventListener("pointerenter", () => { pointerOnImage = true; });
  stage.addEventListener("pointerleave", () => { pointerOnImage = false; });
  // OCR boxes over the image (button or O): off by default, the image stays unobstructed.
  const ocrToggle = document.getElementById("ocr-toggle");
  const ocrOverlay = document.getElementById("ocr-overlay");
  function toggleOcr() {
    if (!ocrToggle || !ocrOverlay) return false;
    const on = ocrOverlay.hidden;
    ocrOverlay.hidden = !on;
    ocrToggle.setAttribute("aria-pressed", String(on));
    announce(on ? "OCR boxes shown" : "OCR boxes hidden");
    return true;
  }
  if (ocrToggle) ocrToggle.addEventListener("click", toggleOcr);
  const unblur = document.getElementById("unblur");
  if (unblur) {
    unblur.addEventListener("click", () => { stage.classList.remove("blurred"); unblur.remove(); syncWidgets(); });
  }
  function ownerField() {
    return fields.find((f) => f.w === canvas.owner) || null;
  }
  const addBox = document.getElementById("add-box");
  if (addBox) {
    addBox.addEventListener("click", () => {
      if (!canvas.enabled) { showCanvasHint(true); return; }
      canvas.add([400, 400, 600, 600]);
      svg.focus();
    });
  }
  if (drawButton) {
    drawButton.addEventListener("click", () => {
      if (!canvas.enabled) { showCanvasHint(true); return; }
      canvas.toggleMode();
    });
  }
  // Why the image cannot be drawn on, when it cannot (e.g. "Boxes are only needed when ...").
  function canvasHintText() {
    const f = ownerField();
    if (!f || !editable) return "";
    if (f.el.hidden && f.visField) {
      const parent = byName[f.visField];
      return `${labelOf(f.name)}: boxes are only needed when ${labelOf(f.visField)} is ${f.visIn.join(" or ")}`
        + (parent && !parent.el.hidden ? "." : ` (and ${labelOf(f.visField)} is shown).`);
    }
    if (stage.classList.contains("blurred")) return "Show the image to draw boxes.";
    return "";
  }
  function showCanvasHint(flash = false) {
    if (!hint) return;
    const text = canvasHintText();
    hint.textContent = text;
    hint.hidden = !text;
    if (flash && text) announce(text);
  }
  svg.addEventListener("pointerdown", () => { if (!canvas.enabled) showCanvasHint(true); });

  // Zoom and fit (static/annotation/layout.js). Boxes follow because they live in the SVG's
  // 0..1000 coordinates.
  const zoomLabel = document.getElementById("zoom-level");
  const fitter = imageFitter({
    column: leftCol, viewport, stage, image,
    onLayout: (zoom) => { zoomLabel.textContent = `${Math.round(zoom * 100)}%`; canvas.render(); },
  });
  const layout = fitter.layout;
  const setZoom = (z) => fitter.setZoom(z);
  document.querySelectorAll("[data-zoom]").forEach((b) => b.addEventListener("click", () => {
    const how = b.dataset.zoom;
    setZoom(how === "in" ? fitter.zoom * 1.5 : how === "out" ? fitter.zoom / 1.5 : 1);
  }));
  svg.addEventListener("keydown", (e) => {
    if (e.key === "+" || e.key === "=") setZoom(fitter.zoom * 1.5);
    if (e.key === "-") setZoom(fitter.zoom / 1.5);
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
    if (f.mention) renderItemText();
  }
  // Widgets whose display depends on other fields (checklist links, the canvas) refresh here.
  function syncWidgets() {
    for (const f of fields) if (f.widget.sync) f.widget.sync(f.w, ctx);
    if (drawButton) drawButton.disabled = !canvas.enabled && !canvasHintText();
    showCanvasHint();
  }

  // What the widgets may ask of the page (static/fields/widgets.js).
  const ctx = {
    itemText,
    canvas,
    boxList: document.getElementById("box-list"),
    selection: () => currentSelection() || lastSelection,
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
      b.disabled = !editable || !f || !visible[f.name];
    });
    document.querySelectorAll("[data-use-all]").forEach((b) => { b.disabled = !editable; });
    if (current && current.el.hidden) setCurrent(visibleFields()[0] || null, { focus: false });
    renderProvenance();
    syncWidgets();
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
    changed({ name });
  }

  // DOM edits -> values: every widget reports a change with an "input" event from its root.
  form.addEventListener("input", (e) => {
    const f = fieldOf(e.target);
    if (!f || !editable) return;
    const v = readField(f);
    values[f.name] = v;
    if (provenance[f.name]) {
      const cand = candidates[provenance[f.name].letter] || {};
      provenance[f.name].edited = !same(v, cand[f.name] ?? absent(f));
    }
    if (f.mention) renderItemText();
    clearError(f.name);
    applyVisibility();
    changed({ name: f.name, typing: isTyping(e.target) });
  });

  // ---------------------------------------------------------------- the focused field
  // One field is "current" (outlined): keys act on it. It follows the focus, and N / P move it.
  let current = null;
  function visibleFields() {
    return fields.filter((f) => !f.el.hidden);
  }
  function setCurrent(f, { focus = true } = {}) {
    if (current) current.el.classList.remove("current");
    document.querySelectorAll(".cand-table tr.current").forEach((tr) => tr.classList.remove("current"));
    current = f;
    if (!f) return;
    f.el.classList.add("current");
    const row = document.querySelector(`.cand-table tr[data-row-for="${CSS.escape(f.name)}"]`);
    if (row) row.classList.add("current");
    if (focus) {
      f.el.focus({ preventScroll: true });
      f.el.scrollIntoView({ block: "nearest" });
    }
  }
  document.addEventListener("focusin", (e) => {
    const f = fieldOf(e.target);
    if (f && f !== current) setCurrent(f, { focus: false });
  });
  function step(delta) {
    const vis = visibleFields();
    if (!vis.length) return;
    const at = current ? vis.indexOf(current) : -1;
    const next = vis[Math.max(0, Math.min(vis.length - 1, at + delta))];
    setCurrent(next);
    announce(labelOf(next.name));
  }
  // Fields where the candidates do not all say the same: where a decision is needed.
  const differing = new Set(fields.filter((f) => {
    const seen = letters.filter((l) => f.name in candidates[l]).map((l) => JSON.stringify(candidates[l][f.name]));
    return new Set(seen).size > 1;
  }).map((f) => f.name));
  for (const name of differing) {
    const row = document.querySelector(`.cand-table tr[data-row-for="${CSS.escape(name)}"]`);
    if (row) row.classList.add("differs");
  }
  function nextDiffering(after) {
    const vis = visibleFields();
    const from = after ? vis.indexOf(after) + 1 : 0;
    return vis.slice(from).find((f) => differing.has(f.name)) || null;
  }
  // After taking candidate X whole, the first field to look at again is one where X stands
  // alone (no other candidate says the same), then any field where the candidates differ.
  function firstAlone(letter) {
    const mine = candidates[letter];
    return visibleFields().find((f) => {
      if (!(f.name in mine) || !differing.has(f.name)) return false;
      const v = JSON.stringify(mine[f.name]);
      return letters.every((l) => l === letter || !(f.name in candidates[l]) || JSON.stringify(candidates[l][f.name]) !== v);
    }) || null;
  }

  function chooseOption(n) {
    const f = current || visibleFields()[0];
    if (!f || !editable || !f.widget.choose) return false;
    setCurrent(f, { focus: false });
    const done = f.widget.choose(f.w, n);
    if (done === "next") {
      // applyVisibility ran in the input handler: a newly shown field is the next one.
      const vis = visibleFields();
      const next = vis[vis.indexOf(f) + 1];
      if (next) setCurrent(next);
    }
    return Boolean(done);
  }

  function enterField(f) {
    if (!f) return;
    if (f.mention) { startMention(); return; }
    const input = f.w.querySelector("input:not([type=hidden]):not([disabled]), textarea, select, button:not([disabled])");
    if (input) input.focus();
  }

  // ---------------------------------------------------------------- candidates
  function useAll(letter) {
    const cand = candidates[letter];
    if (!cand || !editable) return false;
    // Parents first (schema order), so that conditional fields see their parent's new value.
    for (const f of fields) {
      if (f.name in cand) {
        values[f.name] = clone(cand[f.name]);
        provenance[f.name] = { letter, edited: false };
        writeField(f, values[f.name]);
        clearError(f.name);
      }
    }
    applyVisibility();
    changed({ name: `*${letter}` });
    announce(`Took candidate ${letter}`);
    setCurrent(firstAlone(letter) || nextDiffering(null) || current || visibleFields()[0]);
    return true;
  }
  // Alt+letter (or "Use all and submit"): the candidate whole, submitted at once (then the next
  // item, with auto-advance). Nothing is pre-filled: the annotator still chooses the candidate
  // after reading it, so the page does not anchor anyone on a model's answer.
  function useAllAndSubmit(letter) {
    if (useAll(letter)) form.requestSubmit();
  }
  function useField(f, letter) {
    const cand = candidates[letter];
    if (!f || !cand || !editable || f.el.hidden) return;
    if (!(f.name in cand)) { announce(`Candidate ${letter} has no ${labelOf(f.name)}`); return; }
    setValue(f.name, cand[f.name], { fromLetter: letter });
    canvas.preview([]);
    announce(`${labelOf(f.name)} from candidate ${letter}`);
    const vis = visibleFields();
    setCurrent(nextDiffering(f) || vis[vis.indexOf(f) + 1] || f);
  }
  document.querySelectorAll("[data-use-all]").forEach((b) => b.addEventListener("click", () => useAll(b.dataset.useAll)));
  document.querySelectorAll("[data-use-all-submit]").forEach((b) =>
    b.addEventListener("click", () => useAllAndSubmit(b.dataset.useAllSubmit)),
  );
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

  // ---------------------------------------------------------------- text mention
  // The mention is cut from the item text by character offsets (never from the selection's
  // string), so it is an exact copy (guideline 4); the span widget snaps it to whole words.
  function offsetsOf(range) {
    const pre = document.createRange();
    pre.selectNodeContents(itemTextEl);
    pre.setEnd(range.startContainer, range.startOffset);
    const start = pre.toString().length;
    return { start, end: start + range.toString().length };
  }
  function currentSelection() {
    const sel = document.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return null;
    const range = sel.getRangeAt(0);
    if (!itemTextEl.contains(range.startContainer) || !itemTextEl.contains(range.endContainer)) return null;
    const o = offsetsOf(range);
    return o.end > o.start ? o : null;
  }
  let lastSelection = null; // kept for the "Use selection" button, which takes the focus
  document.addEventListener("selectionchange", () => {
    const o = currentSelection();
    if (o) lastSelection = o;
  });
  const mentionField = () => fields.find((f) => f.mention && !f.el.hidden) || null;
  // Selecting with the mouse fills the (visible) mention field at once: no extra click.
  // Alt while selecting keeps the characters as selected (a mention inside a word).
  itemTextEl.addEventListener("pointerup", (e) => {
    const exact = e.altKey;
    setTimeout(() => {
      const f = mentionField();
      const o = currentSelection();
      if (!f || !o || !editable || mention) return;
      f.widget.useSelection(f.w, ctx, exact ? { snap: "char" } : {});
      document.getSelection().removeAllRanges();
      lastSelection = null;
    }, 0);
  });
  // Clicking the highlighted mention clears it.
  itemTextEl.addEventListener("click", (e) => {
    const mark = e.target.closest && e.target.closest("mark.mention");
    const f = mentionField();
    if (!mark || !f || !editable || currentSelection()) return;
    setValue(f.name, null);
    announce(`${labelOf(f.name)} cleared`);
  });

  // Keyboard selection of the mention ("M"): a cursor over whole words of the item text, with
  // Alt for single characters (a mention inside a word). Kept as character offsets [a, b).
  let mention = null; // {f, words, a, b, rtl}
  function startMention() {
    const f = mentionField();
    if (!f || !editable) { announce("No text mention to fill here."); return; }
    const words = wordSpans(itemText);
    if (!words.length) return;
    let [a, b] = words[0];
    const v = values[f.name];
    const at = typeof v === "string" && v ? itemText.indexOf(v) : -1;
    if (at >= 0) { a = at; b = at + v.length; }
    mention = { f, words, a, b, rtl: getComputedStyle(itemTextEl).direction === "rtl" };
    setCurrent(f, { focus: false });
    itemTextEl.classList.add("selecting");
    itemTextEl.focus({ preventScroll: true });
    renderItemText();
    announce(`Selecting the mention: ${mentionText()}. Arrows move by word, Shift and arrows extend, `
      + "Alt for single characters, Enter uses it, Escape cancels.");
  }
  function mentionText() {
    return itemText.slice(mention.a, mention.b);
  }
  function endMention(accept) {
    const m = mention;
    const text = accept ? mentionText() : null;
    mention = null;
    itemTextEl.classList.remove("selecting");
    if (accept) setValue(m.f.name, text);
    renderItemText();
    setCurrent(m.f);
    if (accept) announce(`${labelOf(m.f.name)}: ${text}`);
  }
  function mentionKey(e) {
    const m = mention;
    const w = m.words;
    let key = e.key;
    if (m.rtl && (key === "ArrowLeft" || key === "ArrowRight")) key = key === "ArrowLeft" ? "ArrowRight" : "ArrowLeft";
    const right = key === "ArrowRight";
    if ((right || key === "ArrowLeft") && e.altKey) {
      // Single characters: Alt moves the start, Alt+Shift the end.
      if (e.shiftKey) m.b = Math.max(m.a + 1, Math.min(itemText.length, m.b + (right ? 1 : -1)));
      else m.a = Math.min(m.b - 1, Math.max(0, m.a + (right ? 1 : -1)));
    } else if (right && e.shiftKey) {
      const next = w.find(([, end]) => end > m.b);
      if (next) m.b = next[1];
    } else if (right) {
      const next = w.find(([start]) => start >= m.b) || w[w.length - 1];
      [m.a, m.b] = next;
    } else if (key === "ArrowLeft" && e.shiftKey) {
      const inside = w.filter(([, end]) => end > m.a && end < m.b);
      if (inside.length) m.b = inside[inside.length - 1][1];
      else {
        const before = w.filter(([start]) => start < m.a);
        if (before.length) m.a = before[before.length - 1][0];
      }
    } else if (key === "ArrowLeft") {
      const before = w.filter(([, end]) => end <= m.a);
      [m.a, m.b] = before.length ? before[before.length - 1] : w[0];
    } else if (key === "Home") {
      if (e.shiftKey) m.a = w[0][0]; else [m.a, m.b] = w[0];
    } else if (key === "End") {
      if (e.shiftKey) m.b = w[w.length - 1][1]; else [m.a, m.b] = w[w.length - 1];
    } else if (key === "Enter") { endMention(true); return true; }
    else if (key === "Escape") { endMention(false); return true; }
    else if (key === "Tab") { endMention(false); return false; }
    else return key.length === 1; // swallow other printable keys, let the rest be
    renderItemText();
    announce(mentionText());
    return true;
  }
  itemTextEl.addEventListener("blur", () => { if (mention) endMention(false); });

  function renderItemText() {
    if (mention) {
      const { a, b } = mention;
      const mark = document.createElement("mark");
      mark.className = "kbd-selection";
      mark.textContent = itemText.slice(a, b);
      itemTextEl.replaceChildren(document.createTextNode(itemText.slice(0, a)), mark,
        document.createTextNode(itemText.slice(b)));
      return;
    }
    const f = fields.find((x) => x.mention);
    const value = f ? values[f.name] : null;
    const at = typeof value === "string" && value ? itemText.indexOf(value) : -1;
    if (at < 0) {
      itemTextEl.replaceChildren(document.createTextNode(itemText));
      return;
    }
    const mark = document.createElement("mark");
    mark.className = "mention";
    mark.textContent = value;
    mark.title = editable ? "The mention: click to clear it" : "The mention";
    itemTextEl.replaceChildren(
      document.createTextNode(itemText.slice(0, at)), mark, document.createTextNode(itemText.slice(at + value.length)),
    );
  }

  // ---------------------------------------------------------------- undo / redo
  const undoStack = [];
  const redoStack = [];
  let lastState = null;
  let lastEdit = { name: null, at: 0 };
  const snapshot = () => JSON.stringify({ values, provenance });
  function recordEdit(name, typing) {
    const now = snapshot();
    if (lastState === null || now === lastState) { lastState = now; return; }
    const t = performance.now();
    const coalesce = typing && lastEdit.name === name && t - lastEdit.at < COALESCE_MS;
    if (!coalesce) {
      undoStack.push(lastState);
      if (undoStack.length > UNDO_LIMIT) undoStack.shift();
    }
    redoStack.length = 0;
    lastState = now;
    lastEdit = { name, at: t };
  }
  function restoreSnapshot(snap) {
    const d = JSON.parse(snap);
    values = d.values;
    provenance = d.provenance;
    for (const f of fields) { writeField(f, values[f.name] ?? absent(f)); clearError(f.name); }
    applyVisibility();
    renderItemText();
    lastState = snap;
    lastEdit = { name: null, at: 0 };
    changed({ record: false });
  }
  function undo() {
    if (!editable) return;
    if (!undoStack.length) { announce("Nothing to undo"); return; }
    redoStack.push(lastState);
    restoreSnapshot(undoStack.pop());
    announce("Undone");
  }
  function redo() {
    if (!editable) return;
    if (!redoStack.length) { announce("Nothing to redo"); return; }
    undoStack.push(lastState);
    restoreSnapshot(redoStack.pop());
    announce("Redone");
  }

  // ---------------------------------------------------------------- skip
  const skipCard = document.getElementById("skip-card");
  const skipForm = document.getElementById("skip-form");
  function openSkip() {
    if (!skipCard) return;
    skipCard.open = true;
    const first = skipForm.querySelector("input[name=reason]");
    if (first) first.focus();
  }
  function skipKey(e) {
    const reasons = [...skipForm.querySelectorAll("input[name=reason]")];
    if (/^[1-9]$/.test(e.key) && !e.ctrlKey && !e.altKey && !e.metaKey) {
      const r = reasons[Number(e.key) - 1];
      if (r) { r.checked = true; r.focus(); }
      return true;
    }
    if (e.key === "Enter" && e.target.name === "reason") {
      skipForm.requestSubmit(document.getElementById("skip-btn"));
      return true;
    }
    if (e.key === "Escape") {
      skipCard.open = false;
      setCurrent(current || visibleFields()[0]);
      return true;
    }
    return false;
  }

  // ---------------------------------------------------------------- the keyboard
  function drawContext() {
    return document.activeElement === svg || pointerOnImage || !letters.includes("B");
  }
  document.addEventListener("keydown", (e) => {
    if (e.defaultPrevented || help.isOpen()) return;
    const t = e.target;
    const ctrl = e.ctrlKey || e.metaKey;
    if (ctrl && e.key === "Enter") { e.preventDefault(); form.requestSubmit(); return; }
    if (mention) { if (mentionKey(e)) e.preventDefault(); return; }
    if (isTyping(t)) {
      if (e.key === "Escape" && fieldOf(t)) { e.preventDefault(); setCurrent(fieldOf(t)); }
      return;
    }
    if (skipForm && skipForm.contains(t)) { if (skipKey(e)) e.preventDefault(); return; }
    if (ctrl && !e.altKey && (e.key === "z" || e.key === "Z")) { e.preventDefault(); if (e.shiftKey) redo(); else undo(); return; }
    if (ctrl && !e.altKey && (e.key === "y" || e.key === "Y")) { e.preventDefault(); redo(); return; }
    // Alt+letter: by the key's position (e.code), since Option+A on a Mac types "å".
    const altLetter = /^Key[A-Z]$/.test(e.code || "") ? e.code.slice(3) : "";
    if (e.altKey && !ctrl && !e.shiftKey && letters.includes(altLetter)) {
      e.preventDefault();
      useAllAndSubmit(altLetter);
      return;
    }
    if (ctrl || e.altKey) return; // the browser's own shortcuts
    const key = e.key;
    const letter = key.length === 1 ? key.toUpperCase() : "";
    let done = true;
    if (key === "?") help.open();
    else if (key === "Escape") {
      if (canvas.mode === "draw") canvas.setMode("select");
      else if (canvas.selected >= 0) canvas.select(-1);
      else done = false;
    } else if (/^[1-9]$/.test(key)) done = chooseOption(Number(key));
    else if ((key === "Delete" || key === "Backspace") && canvas.enabled && canvas.selected >= 0) canvas.remove(canvas.selected);
    else if (key === "Enter" && t.classList && t.classList.contains("field")) enterField(fieldOf(t));
    else if ((key === "Delete" || key === "Backspace") && t.classList && t.classList.contains("field") && editable) {
      const f = fieldOf(t);
      setValue(f.name, absent(f)); // clears the focused field (undo brings it back)
      announce(`${labelOf(f.name)} cleared`);
    }
    else if (letter === "B" && !e.shiftKey && drawContext() && (drawButton || canvas.owner)) {
      if (canvas.enabled) canvas.toggleMode(); else showCanvasHint(true);
    } else if (e.shiftKey && letters.includes(letter)) useAll(letter);
    else if (!e.shiftKey && letters.includes(letter)) useField(current || visibleFields()[0], letter);
    else if (letter === "N" && !e.shiftKey) step(1);
    else if (letter === "P" && !e.shiftKey) step(-1);
    else if (letter === "M" && !e.shiftKey) startMention();
    else if (letter === "S" && !e.shiftKey && skipCard) openSkip();
    else if (letter === "O" && !e.shiftKey && ocrToggle) toggleOcr();
    else done = false;
    if (done) e.preventDefault();
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
    const first = fields.find((f) => !f.el.querySelector("[data-error-for]").hidden);
    if (first) {
      setCurrent(first);
      first.el.scrollIntoView({ block: "center", behavior: "smooth" });
    }
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
  // Why the copy in this browser is not on the server yet, said back when it is offered again.
  function pendingReason() {
    if (blocked === "session") return "session";
    if (blocked === "stale" || blocked === "closed") return "conflict";
    if (offline) return "offline";
    return "unsaved";
  }
  function storeLocal(reason = pendingReason()) {
    try {
      localStorage.setItem(cfg.storageKey, JSON.stringify({
        values, provenance, version, dirty, reason, savedAt: Date.now(),
      }));
    } catch { /* storage full or disabled: the server copy is all we have */ }
  }
  function dropLocal() {
    try { localStorage.removeItem(cfg.storageKey); } catch { /* ignore */ }
  }
  function readLocal() {
    try { return JSON.parse(localStorage.getItem(cfg.storageKey) || "null"); } catch { return null; }
  }
  function restoreMessage(local) {
    const when = new Date(local.savedAt || Date.now()).toLocaleString();
    switch (local.reason) {
      case "session":
        return `Your session expired (${when}) before these changes were saved: they were not saved to the server, `
          + "but this browser kept them.";
      case "offline":
        return `The server could not be reached (${when}): these changes were not saved to the server, but this browser kept them.`;
      case "left":
        return `You reloaded or left this page (${when}) before these changes were saved: they were not saved to the server, `
          + "but this browser kept them.";
      case "conflict":
        return `These changes (${when}) were not saved to the server because the annotation was changed elsewhere; `
          + "this browser kept them. Restoring them replaces what the server has.";
      default:
        return `This browser kept changes from ${when} that were not saved to the server (the page closed before they were saved).`;
    }
  }

  // ---------------------------------------------------------------- saving
  function changed({ name = null, typing = false, record = true } = {}) {
    if (record) recordEdit(name, typing);
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
      storeLocal();
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
      storeLocal();
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
      storeLocal();
      showBanner(d.detail || "This annotation was changed elsewhere. Reload the page.", "bad",
        [button("Reload", () => window.location.reload())]);
      return true;
    }
    return false;
  }

  async function saveDraft() {
    clearTimeout(timer);
    if (!dirty || blocked || !editable) return;
    const sent = JSON.stringify(values);
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
      offline = false;
      if (JSON.stringify(values) === sent) dirty = false;
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
    offline = true;
    storeLocal();
    backoff = backoff ? Math.min(MAX_BACKOFF_MS, backoff * 2) : 1000;
    setStatus(`Unsaved (${why}) — retrying in ${Math.round(backoff / 1000)} s`, "bad");
    showBanner("Your changes are not saved yet: the server cannot be reached. They are kept in this browser and saving is retried automatically.", "retry");
    clearTimeout(timer);
    timer = setTimeout(() => enqueue(saveDraft), backoff);
  }

  function autoAdvance() {
    const box = document.querySelector("#auto-advance input[name=auto_advance]");
    return Boolean(box && box.checked);
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
      if (submitBtn) submitBtn.firstChild.textContent = "Submit revision ";
      setStatus(`Submitted ${new Date().toLocaleTimeString()}`, "ok");
      // The response says nothing about the other annotators (blindness): whether the item
      // has moved on shows only when a later revision is refused ("closed").
      const skip = document.querySelector(".skip-card");
      if (skip) skip.remove();
      document.body.dispatchEvent(new CustomEvent("annotation-submitted", { bubbles: true }));
      if (autoAdvance()) {
        showBanner("Submitted. Opening the next item…", "ok");
        document.getElementById("next-form").submit();
        return;
      }
      const revise = cfg.audit ? "You can revise it while this audit is open." : "You can revise it until the item has all its annotations.";
      showBanner(`Submitted. ${revise}`, "ok");
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
      storeLocal(offline ? "offline" : "left");
      e.preventDefault();
      e.returnValue = "";
    }
  });

  // ---------------------------------------------------------------- start
  initWidgets(form, ctx);
  for (const f of fields) writeField(f, values[f.name] ?? absent(f));
  renderItemText();
  applyVisibility();
  lastState = snapshot();
  layout();
  if (!editable) {
    dropLocal();
    setStatus(status === "skipped" ? "Skipped" : "Read only");
  } else {
    setStatus(status === "submitted" ? "Submitted" : version ? "Saved" : "Not started", "ok");
    const local = readLocal();
    if (local && local.dirty && local.values && !same(local.values, values)) {
      showBanner(restoreMessage(local), "warn", [
        button("Restore them", () => {
          values = { ...values, ...local.values };
          provenance = local.provenance || {};
          for (const f of fields) writeField(f, values[f.name] ?? absent(f));
          renderItemText();
          applyVisibility();
          hideBanner();
          changed({ name: "*restore" });
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
  setCurrent(visibleFields()[0] || null, { focus: !banner.hidden ? false : editable });
  root.classList.add("ready");
}
