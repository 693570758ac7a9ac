// Copy to the clipboard: navigator.clipboard when the page may use it (HTTPS or localhost,
// permission granted), otherwise select the text on the page so Ctrl+C / Cmd+C copies it.

/**
 * @param {string} text          what to copy
 * @param {HTMLElement} element  the element showing the text (selected by the fallback)
 * @returns {Promise<"copied" | "selected">}
 */
export async function copyText(text, element) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return "copied";
    } catch {
      // denied or unavailable: fall back to the selection below
    }
  }
  const range = document.createRange();
  range.selectNodeContents(element);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  try {
    // Deprecated but still the only synchronous way where the Clipboard API is missing.
    if (document.execCommand("copy")) return "copied";
  } catch {
    // ignore: the text stays selected
  }
  return "selected";
}

/**
 * Wire a "Copy" button: copies source.textContent and shows the outcome in `status` for a
 * few seconds ("Copied", or "Selected: press Ctrl+C").
 */
export function attachCopyButton(button, source, status, { resetMs = 2500 } = {}) {
  let timer = null;
  button.addEventListener("click", async () => {
    const outcome = await copyText(source.textContent.trim(), source);
    const mac = /Mac|iPhone|iPad/.test(navigator.platform || "");
    status.textContent = outcome === "copied" ? "Copied" : `Selected: press ${mac ? "⌘" : "Ctrl"}+C`;
    status.dataset.outcome = outcome;
    button.classList.toggle("copied", outcome === "copied");
    clearTimeout(timer);
    timer = setTimeout(() => {
      status.textContent = "";
      delete status.dataset.outcome;
      button.classList.remove("copied");
    }, resetMs);
  });
}
