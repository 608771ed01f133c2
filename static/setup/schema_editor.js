// The schema editor (templates/workflow/schema_editor.html): shows each row's type-specific
// inputs, and runs the live preview that the server renders from the form (htmx swaps it into
// #schema-preview). The preview uses the same widgets as the annotation page
// (static/fields/widgets.js), with the same visible_if rule, and "Check" validates the values
// on the server with the schema being edited. No inline script: strict CSP.
import { initWidgets, widgetOf } from "../fields/widgets.js";
import { BoxCanvas } from "../annotation/boxes.js";

function syncRow(row) {
  const select = row.querySelector("[data-type-select]");
  if (!select) return;
  const opt = select.selectedOptions[0];
  const show = {
    choices: Boolean(opt && opt.dataset.choices),
    exclusive: Boolean(opt && opt.dataset.exclusive),
    threshold: Boolean(opt && opt.dataset.threshold),
  };
  for (const part of row.querySelectorAll("[data-for]")) part.hidden = !show[part.dataset.for];
}

function csrf() {
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

function setupPreview(root) {
  if (!root || root.dataset.ready) return;
  root.dataset.ready = "1";
  const fields = [...root.querySelectorAll(".field[data-name]")].map((el) => ({
    el,
    name: el.dataset.name,
    w: el.querySelector("[data-widget]"),
    visField: el.dataset.visibleField || null,
    visIn: (el.dataset.visibleIn || "").split("|"),
  }));
  const textEl = root.querySelector("#preview-text");
  const svg = root.querySelector("#preview-canvas");
  let lastSelection = null;
  const ctx = {
    itemText: textEl ? textEl.textContent : "",
    selection: () => {
      const sel = window.getSelection();
      if (sel && sel.rangeCount && textEl && textEl.contains(sel.anchorNode)) {
        const range = sel.getRangeAt(0);
        const pre = document.createRange();
        pre.selectNodeContents(textEl);
        pre.setEnd(range.startContainer, range.startOffset);
        const start = pre.toString().length;
        lastSelection = { start, end: start + range.toString().length };
      }
      return lastSelection;
    },
    valueOf: (name) => values()[name],
    error: (w, message) => showError(w.dataset.name, message),
    canDraw: (w) => {
      const f = fields.find((x) => x.w === w);
      return Boolean(f) && !f.el.hidden;
    },
  };
  if (svg) ctx.canvas = new BoxCanvas(svg, {});
  if (textEl) textEl.addEventListener("mouseup", () => ctx.selection());
  initWidgets(root, ctx);

  function values() {
    const out = {};
    for (const f of fields) if (f.w) out[f.name] = f.el.hidden ? widgetOf(f.w).absent() : widgetOf(f.w).read(f.w, ctx);
    return out;
  }
  function showError(name, message) {
    const p = root.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
    if (!p) return;
    p.textContent = message || "";
    p.hidden = !message;
  }
  function applyVisibility() {
    const current = values();
    const visible = {};
    for (const f of fields) {
      let show = true;
      if (f.visField) show = Boolean(visible[f.visField]) && f.visIn.includes(current[f.visField]);
      visible[f.name] = show;
      f.el.hidden = !show;
    }
    for (const f of fields) if (f.w && widgetOf(f.w).sync) widgetOf(f.w).sync(f.w, ctx);
  }
  root.addEventListener("input", applyVisibility);
  root.addEventListener("change", applyVisibility);
  applyVisibility();

  const button = root.querySelector("#preview-check");
  const result = root.querySelector("#preview-result");
  button.addEventListener("click", async () => {
    for (const f of fields) showError(f.name, "");
    const response = await fetch(root.dataset.checkUrl, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf(), Accept: "application/json" },
      body: JSON.stringify({ schema: JSON.parse(root.dataset.schema), values: values() }),
      credentials: "same-origin",
    });
    const body = await response.json().catch(() => ({ ok: false, errors: { __all__: "the server did not answer" } }));
    const errors = body.errors || {};
    for (const [name, message] of Object.entries(errors)) showError(name, message);
    result.textContent = body.ok ? "These values would be accepted." : `Not accepted: ${Object.keys(errors).length} field(s) need attention.`
      + (errors.__all__ ? ` ${errors.__all__}` : "");
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("schema-form");
  if (!form) return;
  for (const row of form.querySelectorAll(".schema-row")) syncRow(row);
  form.addEventListener("change", (e) => {
    const row = e.target.closest(".schema-row");
    if (row && e.target.matches("[data-type-select]")) syncRow(row);
  });
  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.target && e.target.id === "schema-preview") setupPreview(document.getElementById("preview-root"));
  });
});
