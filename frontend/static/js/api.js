// Thin fetch wrapper: JSON in, JSON out, CSRF header from <meta name="csrf-token">.
// Every call resolves to {ok, status, data}; network failures reject with an Error whose
// message is meant for the user (callers show it in #status, never swallow it).

export function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.getAttribute("content") || "" : "";
}

export async function request(method, url, body, { accept = "application/json" } = {}) {
  let response;
  try {
    response = await fetch(url, {
      method,
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "X-CSRFToken": csrfToken(),
        Accept: accept,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new Error(`Network error: ${err.message || err}`);
  }
  const text = await response.text();
  let data = null;
  if ((response.headers.get("Content-Type") || "").includes("json") && text) { // problem+json too
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  return { ok: response.ok, status: response.status, data, text };
}

export const getJSON = (url) => request("GET", url);
export const postJSON = (url, body) => request("POST", url, body);
export const putJSON = (url, body) => request("PUT", url, body);

/** Every item of an API collection: follows the list envelope's `next` link page after
 *  page (docs/api.md, "Lists"); resolves to {ok, status, data: [items]} or the first
 *  failed response. */
export async function getAll(url) {
  const items = [];
  let next = url;
  while (next) {
    const resp = await getJSON(next);
    if (!resp.ok) return resp;
    items.push(...resp.data.data);
    next = resp.data.next;
  }
  return { ok: true, status: 200, data: items, text: "" };
}

/** A one-line message for a failed response (RFC 9457 problem details: `detail`, and
 *  `errors` naming each place when there are several). */
export function errorMessage(resp) {
  const d = resp.data;
  let detail = "";
  if (d && typeof d === "object") {
    detail = d.detail || d.message || d.error || "";
    if (typeof detail !== "string") detail = JSON.stringify(detail);
    if (Array.isArray(d.errors) && d.errors.length > 1) {
      detail += ": " + d.errors.map((e) => e.detail || JSON.stringify(e)).join("; ");
    }
  } else if (resp.text && resp.text.length < 300 && !resp.text.trimStart().startsWith("<")) {
    detail = resp.text.trim();
  }
  if (resp.status === 401) detail = detail || "Your session has expired; log in again";
  if (resp.status === 403) detail = detail || "You are not allowed to do this";
  return `Error ${resp.status}${detail ? ": " + detail : ""}`;
}
