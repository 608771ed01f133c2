// The page side of the one job mechanism: when a polled job partial reports that its job has
// finished (HX-Trigger "job-finished", see templates/jobs/_progress.html), every element with
// data-refresh-on-job="<kind>" (or "*") refreshes: through htmx if it has hx-get (it listens
// for "job-refresh"), else the page reloads so it shows the job's result.
document.addEventListener("DOMContentLoaded", () => {
  document.body.addEventListener("job-finished", (event) => {
    const kind = event.detail && event.detail.kind;
    let reload = false;
    for (const el of document.querySelectorAll("[data-refresh-on-job]")) {
      const wanted = el.dataset.refreshOnJob.split(/\s+/);
      if (!wanted.includes(kind) && !wanted.includes("*")) continue;
      if (el.hasAttribute("hx-get") && window.htmx) window.htmx.trigger(el, "job-refresh");
      else reload = true;
    }
    if (reload) window.location.reload();
  });
});
