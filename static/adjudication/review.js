// Reviewer page: pick an annotator's value per field or edit it, overlays per annotator,
// gold boxes drawn with the annotation page's box widget, draft autosave, versioned save (409).
import { BoxCanvas } from "../annotation/boxes.js";

const NS = "http://www.w3.org/2000/svg";
const DEBOUNCE_MS = 800;

const root = document.getElementById("review");
if (root) init(root);

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
  const itemText = document.getElementById("item-text").textContent;
  const rows = [...document.querySelectorAll(".field-row")];
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

  const canvas = new BoxCanvas(document.getElementById("box-canvas"), { onChange: () => changed() });
  canvas.setEnabled(false);

  function setStatus(text, cls = "") { statusEl.textContent = text; statusEl.className = `save-status ${cls}`; }
  function showBanner(text, cls) { banner.hidden = false; banner.className = `banner ${cls}`; bannerText.textContent = text; }

  function rowPick(row) {
    const checked = row.querySelector(`input[name="pick-${row.dataset.name}"]:checked`);
    return checked ? checked.value : null;
  }

  function editorValue(row) {
    const widget = row.dataset.widget;
    if (widget === "boxes") return canvas.getBoxes();
    if (widget === "checkboxes") return [...row.querySelectorAll(".edit-check:checked")].map((c) => c.value);
    const input = row.querySelector(".edit-input");
    const v = input ? input.value : "";
    if (widget === "textlist") return v.split("\n").map((s) => s.trim()).filter(Boolean);
    if (widget === "span") return v === "" ? null : v;  // exact copy: never trimmed
    return v.trim() === "" ? null : v;
  }

  function setEditor(row, value) {
    const widget = row.dataset.widget;
    if (widget === "boxes") { canvas.setBoxes(value || []); return; }
    if (widget === "checkboxes") {
      for (const c of row.querySelectorAll(".edit-check")) c.checked = (value || []).includes(c.value);
      return;
    }
    const input = row.querySelector(".edit-input");
    if (!input) return;
    input.value = widget === "textlist" ? (value || []).join("\n") : (value ?? "");
  }

  function goldBoxesFor(row) {
    const pick = rowPick(row);
    if (pick === "edit") return canvas.getBoxes();
    if (pick === "identical") return valuesOf(1)[row.dataset.name] || [];
    if (pick) return valuesOf(Number(pick))[row.dataset.name] || [];
    return [];
  }

  function refreshRow(row, { seedEditor = false } = {}) {
    const pick = rowPick(row);
    const editor = row.querySelector(".editor");
    editor.hidden = pick !== "edit";
    if (row.dataset.widget === "boxes") {
      canvas.setEnabled(pick === "edit");
      if (pick !== "edit") canvas.setBoxes(goldBoxesFor(row));
    }
    if (seedEditor && pick === "edit") {
      // Start editing from what was chosen before (or Annotator 1's value).
      const prev = row.dataset.prevPick;
      const base = prev && prev !== "edit" && prev !== "identical" ? valuesOf(Number(prev)) : valuesOf(1);
      if (row.dataset.widget !== "boxes" || canvas.getBoxes().length === 0) setEditor(row, base[row.dataset.name]);
    }
    row.dataset.prevPick = pick || "";
  }

  function decisions() {
    const out = {};
    for (const row of rows) {
      const pick = rowPick(row);
      if (!pick || pick === "identical") continue;
      out[row.dataset.name] = pick === "edit" ? { value: editorValue(row) } : { pick: Number(pick) };
    }
    return out;
  }

  // Restore the draft.
  const draft = state.draft || {};
  for (const row of rows) {
    const d = (draft.decisions || {})[row.dataset.name];
    if (d && "pick" in d) {
      const r = row.querySelector(`input[value="${d.pick}"]`);
      if (r) r.checked = true;
    } else if (d && "value" in d) {
      row.querySelector('input[value="edit"]').checked = true;
      setEditor(row, d.value);
    }
    refreshRow(row);
  }
  if (draft.note) note.value = draft.note;

  for (const row of rows) {
    for (const radio of row.querySelectorAll('input[type="radio"]')) {
      radio.addEventListener("change", () => { refreshRow(row, { seedEditor: true }); changed(); });
    }
    row.addEventListener("input", (e) => { if (e.target.type !== "radio") changed(); });
    const useSel = row.querySelector(".use-selection");
    if (useSel) {
      useSel.addEventListener("click", () => {
        const sel = window.getSelection();
        const text = sel ? sel.toString() : "";
        if (!text || !itemText.includes(text)) {
          showBanner("Select words in the item text first: the mention must be an exact copy.", "warn");
          return;
        }
        row.querySelector(".edit-input").value = text;
        changed();
      });
    }
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
    for (const p of document.querySelectorAll(".field-error")) { p.hidden = true; p.textContent = ""; }
    const missing = rows.filter((r) => r.dataset.mark !== "agree" && !rowPick(r));
    if (missing.length) {
      for (const r of missing) {
        const p = r.querySelector(".field-error"); p.hidden = false; p.textContent = "Pick a value or edit it.";
      }
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
        const row = rows.find((r) => r.dataset.name === name);
        if (row) { const p = row.querySelector(".field-error"); p.hidden = false; p.textContent = msg; }
        else { formError.hidden = false; formError.textContent = msg; }
      }
      return;
    }
    formError.hidden = false;
    formError.textContent = data.detail || "Could not save (your session may have ended): log in again in another tab, then save.";
  });
  root.dataset.ready = "1";
}
