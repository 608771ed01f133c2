// Box canvas: draw, select, move, resize and delete boxes on an image, with the mouse and the
// keyboard. Two modes: "select" (a drag on a box moves it, on a corner handle resizes it, on the
// empty image draws) and "draw" (a drag always draws, also inside or across another box, so
// nested and overlapping boxes can be drawn). Smaller boxes are stacked above larger ones, so a
// box drawn inside another stays clickable. Boxes are [x1, y1, x2, y2] integers in [0, 1000] relative to the image's width and
// height (Meme3W Appendix A.1). The SVG uses viewBox 0 0 1000 1000 with
// preserveAspectRatio="none", so box coordinates are SVG coordinates: no pixel conversion is
// stored anywhere, and zooming the image needs no change to the boxes.

const NS = "http://www.w3.org/2000/svg";
export const SCALE = 1000;
const MIN_SIZE = 4;   // smallest box kept after a drag, in 1/1000 of the image
const STEP = 5;       // keyboard step, in 1/1000 of the image
const HANDLE_PX = 14; // corner handle size on screen
const HANDLE_HIT_PX = 28; // the area around a corner that grabs it (WCAG 2.5.8: at least 24 px)

const clamp = (v, lo = 0, hi = SCALE) => Math.max(lo, Math.min(hi, v));

function area(b) {
  return (b[2] - b[0]) * (b[3] - b[1]);
}

function el(name, attrs) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

export class BoxCanvas {
  constructor(svg, { onChange = () => {}, onSelect = () => {}, announce = () => {}, onMode = () => {} } = {}) {
    this.svg = svg;
    this.boxes = [];
    this.selected = -1;
    this.enabled = true;
    this.mode = "select";
    this.drag = null;
    this.previewBoxes = [];
    this.onChange = onChange;
    this.onSelect = onSelect;
    this.announce = announce;
    this.onMode = onMode;
    svg.addEventListener("pointerdown", (e) => this.pointerDown(e));
    svg.addEventListener("pointermove", (e) => this.pointerMove(e));
    svg.addEventListener("pointerup", (e) => this.pointerUp(e));
    svg.addEventListener("pointercancel", () => { this.drag = null; this.render(); });
    svg.addEventListener("keydown", (e) => this.keyDown(e));
    svg.addEventListener("blur", () => this.render());
  }

  setBoxes(boxes) {
    this.boxes = (Array.isArray(boxes) ? boxes : [])
      .filter((b) => Array.isArray(b) && b.length === 4)
      .map((b) => b.map((c) => clamp(Math.round(Number(c) || 0))));
    if (this.selected >= this.boxes.length) this.selected = -1;
    this.render();
  }

  getBoxes() {
    return this.boxes.map((b) => [...b]);
  }

  setEnabled(enabled) {
    this.enabled = enabled;
    this.svg.classList.toggle("disabled", !enabled);
    this.svg.setAttribute("aria-disabled", enabled ? "false" : "true");
    if (!enabled) { this.selected = -1; this.drag = null; this.setMode("select"); }
    this.render();
  }

  setMode(mode) {
    const next = mode === "draw" && this.enabled ? "draw" : "select";
    if (next === this.mode) return;
    this.mode = next;
    this.svg.classList.toggle("draw-mode", next === "draw");
    this.drag = null;
    this.announce(next === "draw" ? "Draw mode: drag to draw a box, also inside another box. B or Escape to leave."
      : "Select mode: drag a box to move it, a corner to resize it.");
    this.onMode(next);
    this.render();
  }

  toggleMode() {
    this.setMode(this.mode === "draw" ? "select" : "draw");
  }

  preview(boxes) {
    this.previewBoxes = Array.isArray(boxes) ? boxes : [];
    this.render();
  }

  select(index) {
    this.selected = index >= 0 && index < this.boxes.length ? index : -1;
    this.render();
    this.onSelect(this.selected);
    if (this.selected >= 0) {
      const b = this.boxes[this.selected];
      this.announce(`Box ${this.selected + 1} of ${this.boxes.length} selected: ${b.join(", ")}`);
    }
  }

  add(box) {
    this.boxes.push(box.map((c) => clamp(Math.round(c))));
    this.selected = this.boxes.length - 1;
    this.changed(`Box ${this.boxes.length} added`);
  }

  remove(index) {
    if (index < 0 || index >= this.boxes.length) return;
    this.boxes.splice(index, 1);
    this.selected = Math.min(index, this.boxes.length - 1);
    this.changed(`Box ${index + 1} removed; ${this.boxes.length} left`);
  }

  changed(message) {
    this.render();
    this.onChange(this.getBoxes());
    if (message) this.announce(message);
  }

  point(e) {
    const r = this.svg.getBoundingClientRect();
    return [
      clamp(Math.round(((e.clientX - r.left) / r.width) * SCALE)),
      clamp(Math.round(((e.clientY - r.top) / r.height) * SCALE)),
    ];
  }

  pointerDown(e) {
    if (!this.enabled || e.button !== 0) return;
    e.preventDefault();
    this.svg.focus({ preventScroll: true });
    const [x, y] = this.point(e);
    const target = e.target;
    const index = target.dataset && target.dataset.index !== undefined ? Number(target.dataset.index) : -1;
    if (this.mode === "draw") {
      this.selected = -1;
      this.drag = { mode: "draw", start: [x, y], current: [x, y] };
    } else if (target.dataset && target.dataset.corner && index >= 0) {
      this.drag = { mode: "resize", index, corner: target.dataset.corner, start: [x, y], orig: [...this.boxes[index]] };
    } else if (index >= 0) {
      this.select(index);
      this.drag = { mode: "move", index, start: [x, y], orig: [...this.boxes[index]] };
    } else {
      this.selected = -1;
      this.drag = { mode: "draw", start: [x, y], current: [x, y] };
    }
    this.svg.setPointerCapture(e.pointerId);
    this.render();
  }

  pointerMove(e) {
    if (!this.drag) return;
    const [x, y] = this.point(e);
    const d = this.drag;
    if (d.mode === "draw") {
      d.current = [x, y];
    } else if (d.mode === "move") {
      const [x1, y1, x2, y2] = d.orig;
      const dx = clamp(x - d.start[0], -x1, SCALE - x2);
      const dy = clamp(y - d.start[1], -y1, SCALE - y2);
      this.boxes[d.index] = [x1 + dx, y1 + dy, x2 + dx, y2 + dy];
    } else if (d.mode === "resize") {
      const b = [...d.orig];
      if (d.corner.includes("w")) b[0] = clamp(x, 0, b[2] - MIN_SIZE);
      if (d.corner.includes("e")) b[2] = clamp(x, b[0] + MIN_SIZE, SCALE);
      if (d.corner.includes("n")) b[1] = clamp(y, 0, b[3] - MIN_SIZE);
      if (d.corner.includes("s")) b[3] = clamp(y, b[1] + MIN_SIZE, SCALE);
      this.boxes[d.index] = b;
    }
    d.moved = true;
    this.render();
  }

  pointerUp(e) {
    const d = this.drag;
    this.drag = null;
    if (!d) return;
    if (this.svg.hasPointerCapture(e.pointerId)) this.svg.releasePointerCapture(e.pointerId);
    if (d.mode === "draw") {
      const [sx, sy] = d.start;
      const [cx, cy] = d.current;
      const box = [Math.min(sx, cx), Math.min(sy, cy), Math.max(sx, cx), Math.max(sy, cy)];
      if (box[2] - box[0] >= MIN_SIZE && box[3] - box[1] >= MIN_SIZE) {
        this.add(box);
      } else {
        this.render();
        this.onSelect(-1);
      }
    } else if (d.moved) {
      this.changed(`Box ${d.index + 1}: ${this.boxes[d.index].join(", ")}`);
    }
  }

  keyDown(e) {
    if (!this.enabled) return;
    const n = this.boxes.length;
    if (e.key === "Tab" && n) {
      // Tab cycles through the boxes, then lets focus leave the image (no keyboard trap).
      const next = e.shiftKey ? (this.selected < 0 ? n - 1 : this.selected - 1) : this.selected + 1;
      if (next >= 0 && next < n) {
        e.preventDefault();
        this.select(next);
      } else {
        this.select(-1);
      }
      return;
    }
    if (e.key === "Escape") {
      e.preventDefault();
      if (this.mode === "draw") this.setMode("select");
      else this.select(-1);
      return;
    }
    if (this.selected < 0) return;
    const i = this.selected;
    const b = [...this.boxes[i]];
    const step = e.altKey ? 1 : STEP;
    const arrows = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] };
    if (arrows[e.key]) {
      e.preventDefault();
      const [dx, dy] = arrows[e.key];
      if (e.shiftKey) {
        // Shift+arrows resize from the bottom-right corner.
        b[2] = clamp(b[2] + dx, b[0] + MIN_SIZE, SCALE);
        b[3] = clamp(b[3] + dy, b[1] + MIN_SIZE, SCALE);
      } else {
        const mx = clamp(dx, -b[0], SCALE - b[2]);
        const my = clamp(dy, -b[1], SCALE - b[3]);
        b[0] += mx; b[2] += mx; b[1] += my; b[3] += my;
      }
      this.boxes[i] = b;
      this.changed(`Box ${i + 1}: ${b.join(", ")}`);
    } else if (e.key === "Delete" || e.key === "Backspace") {
      e.preventDefault();
      this.remove(i);
    }
  }

  render() {
    const svg = this.svg;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    for (const b of this.previewBoxes) {
      if (!Array.isArray(b) || b.length !== 4) continue;
      svg.appendChild(el("rect", { x: b[0], y: b[1], width: b[2] - b[0], height: b[3] - b[1], class: "box-preview",
        "vector-effect": "non-scaling-stroke" }));
    }
    // Larger boxes below smaller ones: a box inside another stays on top, reachable.
    const order = this.boxes.map((b, i) => i)
      .sort((i, j) => area(this.boxes[j]) - area(this.boxes[i]) || i - j);
    order.forEach((i) => {
      const b = this.boxes[i];
      const rect = el("rect", {
        x: b[0], y: b[1], width: b[2] - b[0], height: b[3] - b[1],
        class: i === this.selected ? "box selected" : "box", "data-index": i, "vector-effect": "non-scaling-stroke",
      });
      const title = el("title", {});
      title.textContent = `Box ${i + 1}: ${b.join(", ")}`;
      rect.appendChild(title);
      svg.appendChild(rect);
    });
    this.boxes.forEach((b, i) => {
      const label = el("text", { x: b[0] + 4, y: b[1] + 4, class: "box-label", "data-index": i });
      label.textContent = String(i + 1);
      svg.appendChild(label);
    });
    if (this.selected >= 0 && this.selected < this.boxes.length) {
      const r = svg.getBoundingClientRect();
      const sx = r.width ? SCALE / r.width : 1;
      const sy = r.height ? SCALE / r.height : 1;
      const [x1, y1, x2, y2] = this.boxes[this.selected];
      const corners = { nw: [x1, y1], ne: [x2, y1], sw: [x1, y2], se: [x2, y2] };
      for (const [corner, [cx, cy]] of Object.entries(corners)) {
        // A visible square and, around it, a larger transparent area that grabs the corner.
        for (const [px, cls] of [[HANDLE_HIT_PX, "handle-hit"], [HANDLE_PX, "handle"]]) {
          svg.appendChild(el("rect", {
            x: cx - (px * sx) / 2, y: cy - (px * sy) / 2, width: px * sx, height: px * sy,
            class: `${cls} handle-${corner}`, "data-index": this.selected, "data-corner": corner,
            "vector-effect": "non-scaling-stroke",
          }));
        }
      }
    }
    const d = this.drag;
    if (d && d.mode === "draw") {
      const [sx, sy] = d.start;
      const [cx, cy] = d.current;
      svg.appendChild(el("rect", {
        x: Math.min(sx, cx), y: Math.min(sy, cy), width: Math.abs(cx - sx), height: Math.abs(cy - sy),
        class: "box drawing", "vector-effect": "non-scaling-stroke",
      }));
    }
  }
}
