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
