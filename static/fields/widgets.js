// The field widgets: one entry per FieldType.widget of projects/fieldtypes.py, used by every page
// that edits a value (the annotation and audit workspace, the reviewer's "Edit" cell). The markup
// of each is templates/fields/<widget>.html; its root is the element with data-widget.
//
// Every entry has
//   read(el, ctx)         -> the value, in the shape the type validates (empty rows dropped,
//                            blank text -> null, exact copies never trimmed);
//   write(el, value, ctx) -> shows a value (from a draft, a candidate, an undo) without firing;
//   absent()              -> the type's absence value;
// and, where needed,
//   init(el, ctx)         -> event wiring, once (rows, exclusive options, selection, canvas);
//   sync(el, ctx)         -> refreshes what depends on other fields (checklist links, canvas);
//   choose(el, n)         -> picks the n-th option (keys 1-9): false (nothing), true (done) or
//                            "next" (the field is complete: the page may move to the next one).
// A widget announces a change by an "input" event that bubbles from its root; the page reads
// the value then. `ctx` is what the page provides: itemText + selection() for spans, canvas for
// boxes, valueOf(name) for links to another field, error(el, message), canDraw(el).
//
// Keep regular expressions and braces inside strings out of the entries' bodies:
// projects/tests/test_registry.py reads this file to check that every widget has its methods.

const WORD_CHAR = /[\p{L}\p{N}\p{M}_]/u;
// Characters that are words of their own (metrics.text: Han, Hiragana, Katakana, Hangul).
const CJK_CHAR = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\u3005-\u3007]/u;
const SPACE = /\s/u;
const TRAILING_NUMBER = /(\d+)$/;

const configs = new WeakMap();
const boxStore = new WeakMap();
const highestId = new WeakMap();

function fire(el) {
  el.dispatchEvent(new Event("input", { bubbles: true }));
}

export function configOf(el) {
  if (!configs.has(el)) {
    let c = {};
    try { c = JSON.parse(el.dataset.config || "{}"); } catch { c = {}; }
    configs.set(el, c);
  }
  return configs.get(el);
}

function labelOf(el) {
  const t = el.querySelector("template.row-template");
  const probe = t && t.content.querySelector("[data-label]");
  return (probe && probe.dataset.label) || el.dataset.name;
}

function textOrNull(v) {
  return typeof v === "string" && v.trim() !== "" ? v : null;
}

// ------------------------------------------------------------------ text mentions

function isWord(ch) {
  return ch !== undefined && WORD_CHAR.test(ch) && !CJK_CHAR.test(ch);
}

/** [start, end) of a selection of `text`, trimmed of spaces and, with mode "word", widened to
 * whole words (a CJK character is a word of its own). Always offsets into `text`, so the value
 * cut with them is an exact copy. */
export function snapSpan(text, start, end, mode = "word") {
  let s = Math.max(0, Math.min(start, end));
  let e = Math.min(text.length, Math.max(start, end));
  while (s < e && SPACE.test(text[s])) s += 1;
  while (e > s && SPACE.test(text[e - 1])) e -= 1;
  if (mode === "word" && e > s) {
    while (s > 0 && isWord(text[s - 1]) && isWord(text[s])) s -= 1;
    while (e < text.length && isWord(text[e]) && isWord(text[e - 1])) e += 1;
  }
  return [s, e];
}

/** Word spans [start, end) of `text` (for moving through the text with the keyboard). */
export function wordSpans(text) {
  const out = [];
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (isWord(ch)) {
      let j = i + 1;
      while (j < text.length && isWord(text[j])) j += 1;
      out.push([i, j]);
      i = j;
    } else if (!SPACE.test(ch) && (CJK_CHAR.test(ch) || WORD_CHAR.test(ch))) {
      out.push([i, i + 1]);
      i += 1;
    } else {
      i += 1;
    }
  }
  return out;
}

// ------------------------------------------------------------------ rows (lists)

function rowsEl(el) {
  return el.querySelector(".rows");
}

function rows(el) {
  return [...rowsEl(el).children];
}

function makeRow(el) {
  const tpl = el.querySelector("template.row-template");
  return tpl.content.firstElementChild.cloneNode(true);
}

function rowLimit(el) {
  const c = configOf(el);
  return c.max_items ?? c.max_boxes ?? Infinity;
}

function refreshRows(el, name) {
  rows(el).forEach((row, i) => name(row, i));
  const add = el.querySelector("[data-row-add]");
  if (add) {
    const full = rows(el).length >= rowLimit(el);
    add.disabled = full;
    add.title = full ? `At most ${rowLimit(el)}` : "";
  }
}

// Add / remove rows; `fresh(row)` prepares a new row, `relabel()` names every row's inputs.
function listInit(el, fresh, relabel) {
  el.addEventListener("click", (e) => {
    const add = e.target.closest("[data-row-add]");
    const remove = e.target.closest("[data-row-remove]");
    if (add && el.contains(add)) {
      if (rows(el).length >= rowLimit(el)) return;
      const row = makeRow(el);
      fresh(row);
      rowsEl(el).appendChild(row);
      relabel();
      const first = row.querySelector("input, select, textarea");
      if (first) first.focus();
    } else if (remove && el.contains(remove)) {
      const row = remove.closest(".row");
      const next = row.nextElementSibling || row.previousElementSibling;
      row.remove();
      relabel();
      const focus = next ? next.querySelector("input") : el.querySelector("[data-row-add]");
      if (focus) focus.focus();
      fire(el);
    }
  });
}

// ------------------------------------------------------------------ the widgets

const radio = {
  read(el) {
    const c = el.querySelector("input[type=radio]:checked");
    return c ? c.value : null;
  },
  write(el, value) {
    for (const r of el.querySelectorAll("input[type=radio]")) r.checked = r.value === value;
  },
  absent() {
    return null;
  },
  // "next": a single choice is complete once chosen, the page may move on to the next field.
  choose(el, n) {
    const option = el.querySelectorAll("input[type=radio]")[n - 1];
    if (!option || option.disabled) return false;
    option.checked = true;
    fire(el);
    return "next";
  },
};

function keepExclusive(el, changed) {
  if (!changed.checked) return;
  const boxes = [...el.querySelectorAll("input[type=checkbox]")];
  if (changed.hasAttribute("data-exclusive")) {
    boxes.forEach((c) => { if (c !== changed) c.checked = false; });
  } else {
    boxes.forEach((c) => { if (c.hasAttribute("data-exclusive")) c.checked = false; });
  }
}

const checkboxes = {
  init(el) {
    // Runs before the page's listener (closer to the target): "Other" alone, or no "Other".
    el.addEventListener("input", (e) => {
      if (e.target.type === "checkbox") keepExclusive(el, e.target);
    });
  },
  read(el) {
    return [...el.querySelectorAll("input[type=checkbox]:checked")].map((c) => c.value);
  },
  write(el, value) {
    const set = new Set(Array.isArray(value) ? value : []);
    for (const c of el.querySelectorAll("input[type=checkbox]")) c.checked = set.has(c.value);
  },
  absent() {
    return [];
  },
  choose(el, n) {
    const option = el.querySelectorAll("input[type=checkbox]")[n - 1];
    if (!option || option.disabled) return false;
    option.checked = !option.checked;
    keepExclusive(el, option);
    fire(el);
    return true;
  },
};

const entity = {
  read(el) {
    return textOrNull(el.querySelector("input").value);
  },
  write(el, value) {
    el.querySelector("input").value = typeof value === "string" ? value : "";
  },
  absent() {
    return null;
  },
};

const textarea = {
  read(el) {
    return textOrNull(el.querySelector("textarea").value);
  },
  write(el, value) {
    el.querySelector("textarea").value = typeof value === "string" ? value : "";
  },
  absent() {
    return null;
  },
};

function spanUse(el, ctx, { snap } = {}) {
  const sel = ctx.selection ? ctx.selection() : null;
  const text = ctx.itemText || "";
  if (!sel || sel.end <= sel.start) {
    if (ctx.error) ctx.error(el, "Select the words in the item text first.");
    return;
  }
  const [s, e] = snapSpan(text, sel.start, sel.end, snap || configOf(el).snap);
  if (e <= s) {
    if (ctx.error) ctx.error(el, "The selection holds no words.");
    return;
  }
  span.write(el, text.slice(s, e), ctx);
  fire(el);
}

const span = {
  init(el, ctx) {
    el.querySelector("[data-span-use]").addEventListener("click", () => spanUse(el, ctx));
    el.querySelector("[data-span-clear]").addEventListener("click", () => {
      span.write(el, null, ctx);
      fire(el);
    });
  },
  read(el) {
    const v = el.querySelector("input").value;
    return v === "" ? null : v; // an exact copy: never trimmed
  },
  write(el, value) {
    el.querySelector("input").value = typeof value === "string" ? value : "";
  },
  absent() {
    return null;
  },
  // The page's "use the current selection" (a mouse-up in the text, a key): same rules;
  // { snap: "char" } keeps the selection as it is (Alt held while selecting).
  useSelection(el, ctx, options = {}) {
    spanUse(el, ctx, options);
  },
};

function cleanBoxes(value) {
  return (Array.isArray(value) ? value : [])
    .filter((b) => Array.isArray(b) && b.length === 4 && b.every((c) => Number.isFinite(Number(c))))
    .map((b) => b.map((c) => Math.round(Number(c))));
}

function boxListEl(el, ctx) {
  // The page may show the list of the boxes being drawn beside its image (ctx.boxList).
  return ctx.boxList && ctx.canvas && ctx.canvas.owner === el ? ctx.boxList : el.querySelector(".box-list");
}

function renderBoxes(el, ctx) {
  const list = cleanBoxes(boxStore.get(el));
  const canvas = ctx.canvas;
  const summary = el.querySelector(".box-summary");
  if (summary) {
    summary.textContent = list.length
      ? `${list.length} box${list.length === 1 ? "" : "es"}`
      : "No box: draw one on the image, or leave empty when the target is not depicted.";
  }
  const own = el.querySelector(".box-list");
  const target = boxListEl(el, ctx);
  if (own && own !== target) own.replaceChildren();
  if (!target) return;
  target.replaceChildren();
  list.forEach((b, i) => {
    const li = document.createElement("li");
    const selected = canvas && canvas.owner === el && canvas.selected === i;
    li.className = selected ? "selected" : "";
    const code = document.createElement("code");
    code.textContent = `[${b.join(", ")}]`;
    const pick = document.createElement("button");
    pick.type = "button";
    pick.className = "secondary small";
    pick.textContent = "Select";
    pick.setAttribute("aria-label", `Select box ${i + 1}`);
    pick.addEventListener("click", () => {
      if (!canvas) return;
      canvas.owner = el;
      canvas.setBoxes(boxes.read(el));
      canvas.select(i);
      canvas.svg.focus();
    });
    const del = document.createElement("button");
    del.type = "button";
    del.className = "secondary small";
    del.textContent = "Delete";
    del.setAttribute("aria-label", `Delete box ${i + 1}`);
    del.addEventListener("click", () => {
      boxes.write(el, boxes.read(el).filter((_, j) => j !== i), ctx);
      fire(el);
    });
    li.append(`Box ${i + 1} `, code, " ", pick, " ", del);
    target.appendChild(li);
  });
}

const boxes = {
  init(el, ctx) {
    boxStore.set(el, []);
    const canvas = ctx.canvas;
    if (!canvas) return;
    if (!canvas.owner) canvas.owner = el; // the first boxes field draws until another is selected
    canvas.onChange = (list) => {
      const owner = canvas.owner;
      if (!owner) return;
      boxStore.set(owner, cleanBoxes(list));
      renderBoxes(owner, ctx);
      fire(owner);
    };
    canvas.onSelect = () => { if (canvas.owner) renderBoxes(canvas.owner, ctx); };
  },
  read(el) {
    return cleanBoxes(boxStore.get(el));
  },
  write(el, value, ctx) {
    boxStore.set(el, cleanBoxes(value));
    if (ctx.canvas && ctx.canvas.owner === el) ctx.canvas.setBoxes(boxStore.get(el));
    renderBoxes(el, ctx);
  },
  absent() {
    return [];
  },
  sync(el, ctx) {
    const canvas = ctx.canvas;
    if (!canvas || canvas.owner !== el) return;
    const on = ctx.canDraw ? Boolean(ctx.canDraw(el)) : true;
    if (canvas.enabled !== on) canvas.setEnabled(on);
  },
};

function textRowLabel(el) {
  const label = labelOf(el);
  return () => refreshRows(el, (row, i) => {
    row.querySelector(".row-text").setAttribute("aria-label", `${label} ${i + 1}`);
    row.querySelector("[data-row-remove]").setAttribute("aria-label", `Remove ${label} ${i + 1}`);
  });
}

const textlist = {
  init(el) {
    listInit(el, () => {}, textRowLabel(el));
  },
  read(el) {
    return rows(el).map((r) => r.querySelector(".row-text").value).filter((v) => v.trim() !== "");
  },
  write(el, value) {
    rowsEl(el).replaceChildren();
    for (const text of Array.isArray(value) ? value : []) {
      const row = makeRow(el);
      row.querySelector(".row-text").value = typeof text === "string" ? text : "";
      rowsEl(el).appendChild(row);
    }
    textRowLabel(el)();
  },
  absent() {
    return [];
  },
};

function idNumber(prefix, id) {
  if (typeof id !== "string" || !id.startsWith(prefix)) return 0;
  const m = TRAILING_NUMBER.exec(id.slice(prefix.length));
  return m ? Number(m[1]) : 0;
}

// Ids are never reused while the page is open: removing V2 and adding an item gives V3, so a
// link to V2 can only be stale, never silently point at another item.
function nextId(el) {
  const prefix = configOf(el).id_prefix || "";
  const present = rows(el).map((r) => idNumber(prefix, r.dataset.id));
  const n = Math.max(highestId.get(el) || 0, ...present, 0) + 1;
  highestId.set(el, n);
  return `${prefix}${n}`;
}

function checklistRelabel(el) {
  const label = labelOf(el);
  return () => refreshRows(el, (row) => {
    const id = row.dataset.id;
    row.querySelector(".row-id").textContent = id;
    row.querySelector(".row-text").setAttribute("aria-label", `${label} item ${id}`);
    const link = row.querySelector(".row-link");
    if (link) link.setAttribute("aria-label", `Item ${id} refers to`);
    row.querySelector("[data-row-remove]").setAttribute("aria-label", `Remove item ${id}`);
  });
}

function checklistRow(el, entry) {
  const row = makeRow(el);
  const prefix = configOf(el).id_prefix || "";
  row.dataset.id = typeof entry.id === "string" && entry.id ? entry.id : nextId(el);
  highestId.set(el, Math.max(highestId.get(el) || 0, idNumber(prefix, row.dataset.id)));
  row.dataset.link = typeof entry.link === "string" ? entry.link : "";
  row.querySelector(".row-text").value = typeof entry.text === "string" ? entry.text : "";
  return row;
}

function shorten(text, n = 40) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

const checklist = {
  init(el) {
    listInit(el, (row) => {
      row.dataset.id = nextId(el);
      row.dataset.link = "";
    }, checklistRelabel(el));
    el.addEventListener("change", (e) => {
      if (e.target.classList.contains("row-link")) e.target.closest(".row").dataset.link = e.target.value;
    });
    el.addEventListener("input", (e) => {
      if (e.target.classList && e.target.classList.contains("row-link")) {
        e.target.closest(".row").dataset.link = e.target.value;
      }
    });
  },
  read(el) {
    return rows(el)
      .filter((r) => r.querySelector(".row-text").value.trim() !== "")
      .map((r) => {
        const link = r.querySelector(".row-link");
        const linked = link ? r.dataset.link || link.value : "";
        return { id: r.dataset.id, text: r.querySelector(".row-text").value, link: linked || null };
      });
  },
  write(el, value, ctx) {
    rowsEl(el).replaceChildren();
    for (const entry of Array.isArray(value) ? value : []) {
      if (entry && typeof entry === "object") rowsEl(el).appendChild(checklistRow(el, entry));
    }
    checklistRelabel(el)();
    checklist.sync(el, ctx);
  },
  absent() {
    return [];
  },
  // The link menus list the linked field's current items; a link to an item that is gone stays
  // (marked "removed"), so the page and the server can say what is wrong instead of dropping it.
  sync(el, ctx) {
    const target = configOf(el).link_to;
    if (!target) return;
    const items = ((ctx && ctx.valueOf ? ctx.valueOf(target) : null) || [])
      .filter((e) => e && typeof e.id === "string");
    for (const row of rows(el)) {
      const select = row.querySelector(".row-link");
      if (!select) continue;
      const want = row.dataset.link || "";
      const known = items.some((e) => e.id === want);
      const options = [["", configOf(el).link_required ? "— choose —" : "(none)"]]
        .concat(items.map((e) => [e.id, `${e.id}: ${shorten(e.text || "")}`]));
      if (want && !known) options.push([want, `${want} (removed)`]);
      const signature = JSON.stringify(options);
      if (select.dataset.signature !== signature) {
        select.replaceChildren(...options.map(([v, t]) => {
          const o = document.createElement("option");
          o.value = v;
          o.textContent = t;
          return o;
        }));
        select.dataset.signature = signature;
      }
      select.value = want;
      select.classList.toggle("stale-link", Boolean(want) && !known);
      select.setAttribute("aria-invalid", want && !known ? "true" : "false");
    }
  },
};

function pairRelabel(el) {
  return () => refreshRows(el, (row, i) => {
    for (const input of row.querySelectorAll(".row-part")) {
      input.setAttribute("aria-label", `Pair ${i + 1} ${input.dataset.part}`);
    }
    row.querySelector("[data-row-remove]").setAttribute("aria-label", `Remove pair ${i + 1}`);
  });
}

const pairlist = {
  init(el) {
    listInit(el, () => {}, pairRelabel(el));
  },
  read(el) {
    const parts = configOf(el).parts || [];
    return rows(el)
      .map((r) => Object.fromEntries(parts.map((p) => {
        const input = r.querySelector(`.row-part[data-part="${CSS.escape(p)}"]`);
        return [p, input ? input.value : ""];
      })))
      .filter((entry) => Object.values(entry).some((v) => v.trim() !== ""));
  },
  write(el, value) {
    rowsEl(el).replaceChildren();
    for (const entry of Array.isArray(value) ? value : []) {
      if (!entry || typeof entry !== "object") continue;
      const row = makeRow(el);
      for (const input of row.querySelectorAll(".row-part")) {
        const v = entry[input.dataset.part];
        input.value = typeof v === "string" ? v : "";
      }
      rowsEl(el).appendChild(row);
    }
    pairRelabel(el)();
  },
  absent() {
    return [];
  },
};

export const WIDGETS = {
  radio,
  checkboxes,
  entity,
  span,
  boxes,
  textarea,
  textlist,
  checklist,
  pairlist,
};

/** The widget entry of a root element (data-widget), or throws naming the missing widget. */
export function widgetOf(el) {
  const w = WIDGETS[el.dataset.widget];
  if (!w) throw new Error(`no widget "${el.dataset.widget}" in static/fields/widgets.js`);
  return w;
}

/** Call every widget's init on the roots under `root` (once per root). */
export function initWidgets(root, ctx) {
  for (const el of root.querySelectorAll("[data-widget]")) {
    if (el.dataset.widgetReady) continue;
    const w = widgetOf(el);
    if (w.init) w.init(el, ctx);
    el.dataset.widgetReady = "1";
  }
}
