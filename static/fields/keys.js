// Keyboard helpers shared by the annotation, audit, review and near-duplicate pages.
//
// A shortcut never fires while the person types: in a text input, a text area, a select or an
// editable element, keys belong to that control (Esc leaves it; Ctrl+Enter is the only chord a
// page may still take, to submit).

const TEXT_TYPES = new Set(["text", "search", "email", "url", "tel", "password", "number", "date",
  "datetime-local", "month", "time", "week"]);

export function isTyping(el) {
  if (!el || el === document.body || el === document.documentElement) return false;
  if (el.isContentEditable) return true;
  const tag = el.tagName;
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag === "INPUT") return TEXT_TYPES.has((el.getAttribute("type") || "text").toLowerCase()) && !el.readOnly;
  return false;
}

/** A plain key (no Ctrl/Alt/Meta), as typed: "a", "A" (with Shift), "1", "?", "Enter"... */
export function plainKey(e) {
  if (e.ctrlKey || e.altKey || e.metaKey) return null;
  return e.key;
}

/** The "?" dialog: opened by the button and the ? key, closed by Esc / its button; focus returns. */
export function keysDialog(dialog, button) {
  if (!dialog) return { open: () => {}, isOpen: () => false };
  let opener = null;
  const open = () => {
    if (dialog.open) return;
    opener = document.activeElement;
    dialog.showModal();
    const close = dialog.querySelector("button");
    if (close) close.focus();
  };
  dialog.addEventListener("close", () => {
    if (opener && opener.focus) opener.focus({ preventScroll: true });
  });
  if (button) button.addEventListener("click", open);
  return { open, isOpen: () => dialog.open };
}

/** A polite live region message for screen readers (the element must exist in the page). */
export function announcer(el) {
  return (msg) => {
    if (!el) return;
    el.textContent = "";
    // A new text node after a tick makes repeated identical messages heard again.
    setTimeout(() => { el.textContent = msg; }, 10);
  };
}
