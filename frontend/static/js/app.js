// Small progressive enhancements for every page (classic script, loaded with defer).
(function () {
  "use strict";

  // <time datetime="..."> in the viewer's local time zone.
  function localizeTimes(root) {
    for (const t of root.querySelectorAll("time[datetime]:not([data-localized])")) {
      const d = new Date(t.getAttribute("datetime"));
      if (isNaN(d)) continue;
      t.title = t.getAttribute("datetime");
      t.textContent = d.toLocaleString(undefined, {
        year: "numeric", month: "short", day: "numeric",
        hour: "2-digit", minute: "2-digit", second: "2-digit",
      });
      t.dataset.localized = "1";
    }
  }

  // <pre class="json"> holds JSON escaped for HTML by Jinja's tojson (\u003c for <, ...);
  // re-serialize it so people read the characters themselves.
  function prettyJson(root) {
    for (const pre of root.querySelectorAll("pre.json:not([data-pretty])")) {
      try {
        pre.textContent = JSON.stringify(JSON.parse(pre.textContent), null, 2);
      } catch (e) {
        /* leave as rendered */
      }
      pre.dataset.pretty = "1";
    }
  }

  function enhance(root) {
    localizeTimes(root);
    prettyJson(root);
  }

  // Behaviour pages declare with data attributes instead of inline handlers (the
  // Content-Security-Policy allows no inline script; docs/security.md):
  // form[data-no-submit] never submits (Enter in a field); a submit button or form with
  // data-confirm="question" asks first; select[data-autosubmit] submits its form on
  // change; select[data-show-forms="<selector>"] shows the matching form whose
  // data-type is the selected value and hides the others.
  document.addEventListener("submit", (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement)) return;
    if (form.hasAttribute("data-no-submit")) {
      e.preventDefault();
      return;
    }
    const question = (e.submitter && e.submitter.dataset.confirm) || form.dataset.confirm;
    if (question && !window.confirm(question)) e.preventDefault();
  });
  document.addEventListener("change", (e) => {
    const el = e.target;
    if (!(el instanceof HTMLSelectElement)) return;
    if (el.hasAttribute("data-autosubmit") && el.form) el.form.requestSubmit();
    if (el.dataset.showForms) {
      for (const f of document.querySelectorAll(el.dataset.showForms)) {
        f.hidden = f.dataset.type !== el.value;
      }
    }
  });

  document.addEventListener("DOMContentLoaded", () => enhance(document));
  document.addEventListener("htmx:afterSettle", (e) => enhance(e.target || document));
  // Forms inside [data-swap-errors] re-render their page with the error (400/404/409):
  // show that answer instead of htmx's default of ignoring 4xx responses.
  document.addEventListener("htmx:beforeSwap", (e) => {
    const status = e.detail.xhr.status;
    const source = e.detail.requestConfig && e.detail.requestConfig.elt;
    if (status >= 400 && status < 500 && source && source.closest("[data-swap-errors]")) {
      e.detail.shouldSwap = true;
      e.detail.isError = false;
    }
  });
})();
