// Keyboard shortcuts of the study pages (no inline script: strict CSP).
// [data-verdict-keys]: 1 / 2 / 3 pick the verdict, Enter saves -- outside text fields.
// [data-submit-shortcut]: Ctrl/Cmd+Enter submits from anywhere in the form (the first submit button).
(function () {
  "use strict";
  function typing(el) {
    return el && (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && el.type !== "radio" && el.type !== "checkbox"));
  }
  document.addEventListener("keydown", function (ev) {
    var verdictForm = document.querySelector("[data-verdict-keys]");
    var submitForm = document.querySelector("[data-submit-shortcut]");
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && submitForm) {
      ev.preventDefault();
      var button = submitForm.querySelector("button[type=submit]");
      if (button) submitForm.requestSubmit(button);
      return;
    }
    if (!verdictForm || typing(ev.target) || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    var radios = verdictForm.querySelectorAll("input[type=radio][name=verdict]");
    var n = parseInt(ev.key, 10);
    if (n >= 1 && n <= radios.length) {
      ev.preventDefault();
      radios[n - 1].checked = true;
      radios[n - 1].focus();
    } else if (ev.key === "Enter") {
      ev.preventDefault();
      verdictForm.requestSubmit(verdictForm.querySelector("button[type=submit]"));
    }
  });
})();
