// Fit the image beside the rest of its column: the whole image shows in the room the column
// leaves (on wide screens the column is as tall as the window and scrolls on its own), zoom
// scales it inside the scrolling viewport. Used by the annotation and the review pages.

export function imageFitter({ column, viewport, stage, image, onLayout = () => {} }) {
  let zoom = 1;
  function layout() {
    const aspect = (image.naturalWidth || Number(image.getAttribute("width")) || 1)
      / (image.naturalHeight || Number(image.getAttribute("height")) || 1);
    let room = window.innerHeight * 0.62;
    if (getComputedStyle(column).overflowY === "auto" && column.clientHeight) {
      const gap = parseFloat(getComputedStyle(column).rowGap) || 0;
      const others = [...column.children].filter((c) => c !== viewport && !c.hidden && c.offsetParent !== null)
        .reduce((sum, c) => sum + c.offsetHeight + gap, 0);
      // A crowded column (a long explanation from an earlier stage) scrolls rather than
      // shrinking the image below two fifths of its height: the picture must stay legible.
      room = Math.max(160, column.clientHeight * 0.4, Math.min(room, column.clientHeight - others - 8));
    }
    viewport.style.maxHeight = `${Math.round(room)}px`;
    const width = Math.max(120, Math.min(viewport.clientWidth || column.clientWidth, room * aspect));
    stage.style.width = `${Math.round(width * zoom)}px`;
    onLayout(zoom);
  }
  // Only the window (not the content beside the image) changes the image's size: a box list
  // growing while one draws must not move the image under the pointer.
  window.addEventListener("resize", layout);
  if (!image.complete) image.addEventListener("load", layout, { once: true });
  return {
    layout,
    get zoom() { return zoom; },
    setZoom(z) { zoom = Math.max(1, Math.min(4, z)); layout(); },
  };
}
