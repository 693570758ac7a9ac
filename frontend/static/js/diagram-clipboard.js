// Copy and paste of diagram fragments ({nodes, edges}), also between workflows and tabs.
//
// The fragment travels as JSON text on the system clipboard (navigator.clipboard), marked
// with FORMAT so other text is not taken for nodes. When the Clipboard API is missing or
// denied (no permission, not a secure context), the fragment is kept in localStorage: an
// in-page clipboard that other Railyard pages of the same origin read too. A copy always
// fills both; a paste prefers the system clipboard when it holds a fragment. An exported
// workflow (the Export document, designer_schema/transfer.py) pastes as its nodes and
// edges, placed like any paste: clear of every node already there.

export const FORMAT = "railyard/diagram-fragment@1";
const EXPORT_FORMAT = "railyard/workflow";
const STORAGE_KEY = "railyard.designer.clipboard";

/** The clipboard text of a fragment. */
export function encodeFragment(fragment) {
  return JSON.stringify({ format: FORMAT, nodes: fragment.nodes, edges: fragment.edges });
}

/** A fragment from clipboard text (a fragment or an exported workflow), or null when the text is neither. */
export function decodeFragment(text) {
  if (!text || typeof text !== "string") return null;
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    return null;
  }
  if (data?.format === EXPORT_FORMAT && data.diagram && typeof data.diagram === "object") data = data.diagram;
  else if (data?.format !== FORMAT) return null;
  if (!Array.isArray(data.nodes)) return null;
  return { nodes: data.nodes, edges: Array.isArray(data.edges) ? data.edges : [] };
}

/**
 * Put a fragment on the clipboard.
 * @returns {Promise<"system" | "page">} where it went ("page": only the in-page clipboard)
 */
export async function writeFragment(fragment) {
  const text = encodeFragment(fragment);
  try {
    localStorage.setItem(STORAGE_KEY, text);
  } catch {
    // storage disabled: the system clipboard alone
  }
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return "system";
    } catch {
      // denied: the in-page clipboard holds it
    }
  }
  return "page";
}

/** The fragment on the clipboard (system first, then in-page), or null. */
export async function readFragment() {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      return decodeFragment(await navigator.clipboard.readText());
    } catch {
      // denied: fall back to the in-page clipboard
    }
  }
  try {
    return decodeFragment(localStorage.getItem(STORAGE_KEY));
  } catch {
    return null;
  }
}
