// Near-duplicate review on the keyboard: S same, D different, U undo, J/K (or arrows) to move.
// Each judgement goes out at once (htmx posts the card's form) and the focus moves to the next
// pair without waiting for the answer, so judging is as fast as reading.
import { announcer, isTyping, keysDialog } from "../fields/keys.js";

const list = document.getElementById("pairs");
if (list) init(list);

function init(list) {
  const announce = announcer(document.getElementById("nd-live"));
  const help = keysDialog(document.getElementById("keys-help"), null);
  const undo = []; // [{id, previous status}]
  let currentId = null;
  let reloadWhenIdle = false;

  const cards = () => [...list.querySelectorAll(".nd-pair")];
  const cardById = (id) => document.getElementById(`pair-${id}`);
  function current() {
    return (currentId && cardById(currentId)) || cards()[0] || null;
  }
  function setCurrent(card, { focus = true } = {}) {
    for (const c of list.querySelectorAll(".nd-pair.current")) c.classList.remove("current");
    if (!card) { currentId = null; return; }
    currentId = card.id.replace("pair-", "");
    card.classList.add("current");
    if (focus) {
      card.focus({ preventScroll: true });
      card.scrollIntoView({ block: "nearest" });
    }
  }
  function move(delta) {
    const all = cards();
    const at = all.indexOf(current());
    const next = all[Math.max(0, Math.min(all.length - 1, at + delta))];
    if (next) setCurrent(next);
  }
  // On the "unreviewed" tab the next pair is the next one still unreviewed.
  function nextAfter(card) {
    const all = cards();
    const rest = all.slice(all.indexOf(card) + 1);
    if (list.dataset.status !== "unreviewed") return rest[0] || null;
    return rest.find((c) => c.dataset.status === "unreviewed") || null;
  }
  // A card whose answer is still out has a stale form (its expected_status is the state before
  // that request): what is asked of it meanwhile (an undo, a second judgement) waits in `queued`
  // and goes out when its answer is in, so keys pressed faster than the server never lose work.
  // A card just swapped in is not wired yet either: htmx processes new content only when it
  // settles (20 ms later; until then the card has the class htmx-added), and a click on its
  // button in that window would submit the form natively, leaving the page mid-run.
  const queued = new Map(); // pair id -> decision to send when its answer is in
  const inFlight = (id) => {
    const card = cardById(id);
    return Boolean(card && (card.classList.contains("htmx-added") || card.querySelector("form.htmx-request")));
  };
  const sent = new Map(); // pair id -> the decision of its request in flight
  function send(id, decision) {
    if (inFlight(id)) { queued.set(id, decision); return true; }
    const btn = cardById(id)?.querySelector(`button[name="decision"][value="${decision}"]`);
    if (!btn || btn.disabled) return false;
    sent.set(id, decision);
    btn.click();
    return true;
  }
  // The state a pair will have once what was asked of it is done: the queued decision, else the
  // one in flight, else the state its card shows (judging against the card alone would take a
  // key pressed while an undo is in flight for "already so" and drop it).
  function stateOf(id, card) {
    if (queued.has(id)) return queued.get(id);
    if (sent.has(id) && card.querySelector("form.htmx-request")) return sent.get(id);
    return card.dataset.status;
  }
  function drain() {
    for (const [id, decision] of [...queued]) {
      if (inFlight(id)) continue;
      queued.delete(id);
      send(id, decision);
    }
  }
  // The same window for a mouse click: the judgement waits for the card to be wired.
  list.addEventListener("submit", (e) => {
    const card = e.target.closest(".nd-pair");
    if (!card || !card.classList.contains("htmx-added")) return;
    e.preventDefault();
    if (e.submitter?.value) queued.set(card.id.replace("pair-", ""), e.submitter.value);
  }, true);
  const idle = () => queued.size === 0 && !list.querySelector("form.htmx-request, .nd-pair.htmx-added");
  function judge(card, decision) {
    if (!card) return;
    const id = card.id.replace("pair-", "");
    const previous = stateOf(id, card);
    if (previous === decision) { announce(`Already ${decision}`); return; }
    if (!send(id, decision)) { announce(`Already ${decision}`); return; }
    undo.push({ id, previous });
    announce(decision === "same" ? "Same meme" : decision === "different" ? "Different" : "Back to unreviewed");
    const next = nextAfter(card);
    if (next) setCurrent(next);
    else if (list.dataset.status === "unreviewed") {
      // Every pair of this page is judged: the next ones come when the answers are in.
      reloadWhenIdle = true;
      announce("Page done: loading the next pairs");
    }
  }
  function undoLast() {
    const last = undo.pop();
    if (!last) { announce("Nothing to undo"); return; }
    const card = cardById(last.id);
    if (!card) return;
    if (!send(last.id, last.previous)) { announce("Cannot undo: the pair changed meanwhile"); return; }
    reloadWhenIdle = false;
    setCurrent(card);
    announce("Undone");
  }

  // The server answers each judgement with the pair's card (its state as stored). When every
  // card of the page shows a judged state, the next unreviewed pairs are loaded.
  function answered() {
    if (currentId && cardById(currentId)) cardById(currentId).classList.add("current");
    drain();
    if (reloadWhenIdle && idle() && cards().every((c) => c.dataset.status !== "unreviewed")) window.location.reload();
  }
  document.body.addEventListener("htmx:afterSettle", answered);
  // A request that failed without a swap (network down) ends too: what waited for it goes out.
  document.body.addEventListener("htmx:afterRequest", () => setTimeout(answered, 0));

  document.addEventListener("keydown", (e) => {
    if (e.defaultPrevented || help.isOpen() || isTyping(e.target)) return;
    if (e.ctrlKey || e.altKey || e.metaKey) return;
    const k = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    let done = true;
    if (k === "s") judge(current(), "same");
    else if (k === "d") judge(current(), "different");
    else if (k === "u") undoLast();
    else if (k === "j" || k === "ArrowDown") move(1);
    else if (k === "k" || k === "ArrowUp") move(-1);
    else if (k === "?") help.open();
    else done = false;
    if (done) e.preventDefault();
  });
  list.addEventListener("focusin", (e) => {
    const card = e.target.closest(".nd-pair");
    if (card && card.id !== `pair-${currentId}`) setCurrent(card, { focus: false });
  });
  const first = cards().find((c) => c.dataset.status === list.dataset.status) || cards()[0];
  if (first) setCurrent(first, { focus: false });
  list.dataset.ready = "1";
}
