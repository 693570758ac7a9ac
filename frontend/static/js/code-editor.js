// The code editor of the config panel: a text area whose schema has "x-code" (the Code
// step's JavaScript), and every JSON setting (data-code="json": bodies, For each items,
// with "=..." expressions told apart), gets syntax highlighting; a JSON error's line and
// column are shown once under the field (fields.js, by json-text.js jsonError), and JSON
// lines wrap (app.css). The text area stays the control (typing,
// selection, undo, the panel's "input" events are the browser's own); its text is made
// transparent over a <pre> holding the same text highlighted by the vendored
// highlight.js (frontend/static/vendor/highlight, ES modules, classes only: no inline
// style or script, so it fits the pages' Content-Security-Policy).

import hljs from "../vendor/highlight/core.min.js";
import javascript from "../vendor/highlight/javascript.min.js";

hljs.registerLanguage("javascript", javascript);
hljs.registerLanguage("json", jsonWithExpressions);

/**
 * JSON as the JSON settings hold it (HTTP Request and Respond bodies, For each items): keys
 * (hljs-attr), strings, numbers, true/false/null, and Railyard's expressions, strings
 * starting with one "=" (hljs-template-variable; "==" is an escaped literal string).
 */
function jsonWithExpressions(hl) {
  const escapes = [hl.BACKSLASH_ESCAPE];
  return {
    name: "JSON",
    keywords: { literal: ["true", "false", "null"] },
    contains: [
      { className: "attr", begin: /"(?:\\.|[^\\"\r\n])*"(?=\s*:)/, relevance: 1 },
      { className: "template-variable", begin: /"=(?!=)/, end: /"/, contains: escapes },
      { className: "string", begin: /"/, end: /"/, contains: escapes },
      hl.C_NUMBER_MODE,
      { className: "punctuation", begin: /[{}[\],:]/, relevance: 0 },
    ],
  };
}

export function attachCodeEditors(container) {
  const enhance = () => {
    for (const area of container.querySelectorAll("textarea[data-code]:not([data-code-ready])")) {
      enhanceArea(area);
    }
  };
  new MutationObserver(enhance).observe(container, { childList: true, subtree: true });
  enhance();
}

function enhanceArea(area) {
  area.dataset.codeReady = "1";
  const language = hljs.getLanguage(area.dataset.code) ? area.dataset.code : null;
  if (!language) return;
  const box = document.createElement("div");
  box.className = "code-editor";
  const pre = document.createElement("pre");
  pre.className = "code-highlight";
  pre.setAttribute("aria-hidden", "true");
  const code = document.createElement("code");
  pre.append(code);
  area.before(box);
  box.append(pre, area);
  const paint = () => {
    // a trailing newline keeps the last (empty) line as tall as the text area's
    code.innerHTML = hljs.highlight(area.value + "\n", { language, ignoreIllegals: true }).value;
    pre.scrollTop = area.scrollTop;
    pre.scrollLeft = area.scrollLeft;
  };
  area.addEventListener("input", paint);
  area.addEventListener("scroll", () => {
    pre.scrollTop = area.scrollTop;
    pre.scrollLeft = area.scrollLeft;
  });
  if (language === "json") return paint(); // Tab keeps moving the focus in a JSON setting
  area.addEventListener("keydown", (e) => {
    if (e.key !== "Tab" || e.shiftKey || e.ctrlKey || e.metaKey || e.altKey) return;
    e.preventDefault(); // a tab indents (Escape then Tab leaves the field)
    area.setRangeText("  ", area.selectionStart, area.selectionEnd, "end");
    area.dispatchEvent(new Event("input", { bubbles: true }));
  });
  paint();
}
