// Exports pages. A near-duplicate judgement refused with 400 (bad input) or 409 (someone judged
// the pair meanwhile) still swaps the server's card in, so its message and the pair's current
// state are shown instead of htmx silently ignoring the response.
document.addEventListener("htmx:beforeSwap", (event) => {
  const status = event.detail.xhr.status;
  if ((status === 400 || status === 409) && event.detail.target.closest(".nd-pair")) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});
