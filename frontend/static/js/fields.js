// Field widgets of the config panel, one entry per data-kind (frontend/field_views.py
// chooses the kind from the field's schema; templates/fragments/config_panel.html draws it).
//
// Each kind has a reader (control -> {value} | {omit: true} | {error}) and, for the fx
// toggle, literalText (widget -> text) and setLiteral (text -> widget). registerFieldKind()
// adds or replaces a kind; onFieldMount() registers a hook called for every field of a
// freshly rendered panel ({wrap, name, path, kind, control, panel}): the place where an
// expression editor attaches to a field.
//
// Durations are typed as "30s", "5m", "1h 30m", "250ms", "2d" or a plain number of seconds
// and stored as seconds.

import { jsonError } from "./json-text.js";

const kinds = new Map();
const mountHooks = [];

export function registerFieldKind(kind, impl) {
  kinds.set(kind, impl);
}

/** fn({wrap, name, path, kind, control, panel}) runs for each field after a panel renders. */
export function onFieldMount(fn) {
  mountHooks.push(fn);
}

/** Call the mount hooks for every field of `form`. */
export function mountFields(form, panel) {
  for (const wrap of form.querySelectorAll(".field[data-field-wrap]")) {
    const path = wrap.dataset.fieldWrap;
    const control = wrap.querySelector("[data-field], [data-subfield], [data-field-off]");
    const info = { wrap, path, name: path.split(".").pop(), kind: control?.dataset.kind || "", control, panel };
    for (const hook of mountHooks) {
      try {
        hook(info);
      } catch (err) {
        console.error("field mount hook failed", err);
      }
    }
  }
  for (const group of form.querySelectorAll('[data-kind="group"]')) updateRetrySummary(group);
}

export const isExpr = (control, text) => control.hasAttribute("data-expression") && text.startsWith("=");

/** -> {value} | {omit: true} | {error: "..."} */
export function readControl(control) {
  const impl = kinds.get(control.dataset.kind);
  if (impl) return impl.read(control);
  return readText(control);
}

/** The literal widget's value as text (what "fx" starts the expression from). */
export function literalText(control) {
  const impl = kinds.get(control.dataset.kind);
  return impl && impl.literalText ? impl.literalText(control) : control.value;
}

/** Put text back into a literal widget (leaving expression mode); what does not fit is dropped. */
export function setLiteral(control, text) {
  const impl = kinds.get(control.dataset.kind);
  if (impl && impl.setLiteral) impl.setLiteral(control, text);
  else control.value = text;
}

// ------------------------------------------------------------------ scalar kinds

function readText(control) {
  const text = control.value;
  if (text.trim() === "") return { omit: true };
  return { value: text };
}

function readNumber(control) {
  const kind = control.dataset.kind;
  const text = control.value;
  if (text.trim() === "") return { omit: true };
  if (isExpr(control, text)) return { value: text };
  const n = Number(text);
  if (!Number.isFinite(n) || (kind === "integer" && !Number.isInteger(n))) {
    return { error: kind === "integer" ? "Enter a whole number" : "Enter a number" };
  }
  if (control.min !== "" && control.min !== undefined && n < Number(control.min)) return { error: `Enter at least ${control.min}` };
  if (control.max !== "" && control.max !== undefined && n > Number(control.max)) return { error: `Enter at most ${control.max}` };
  return { value: n };
}

const numberKind = {
  read: readNumber,
  setLiteral(control, text) {
    control.value = Number.isFinite(Number(text)) && text.trim() !== "" ? text : "";
  },
};
registerFieldKind("number", numberKind);
registerFieldKind("integer", numberKind);
registerFieldKind("string", { read: readText });
registerFieldKind("credential", { read: readText });

registerFieldKind("expression", {
  read(control) {
    const text = control.value;
    if (text.trim() === "" || text.trim() === "=") return { omit: true };
    return { value: text.startsWith("=") ? text : `=${text}` };
  },
});

registerFieldKind("boolean", {
  read(control) {
    if (control.type === "checkbox") return { value: control.checked };
    const text = control.value;
    if (text.trim() === "") return { omit: true };
    if (isExpr(control, text)) return { value: text };
    if (text === "true" || text === "false") return { value: text === "true" };
    return { error: "Enter true, false or an expression starting with =" };
  },
  literalText: (control) => (control.type === "checkbox" ? String(control.checked) : control.value),
  setLiteral(control, text) {
    if (control.type === "checkbox") control.checked = text.trim() === "true";
    else control.value = text;
  },
});

registerFieldKind("enum", {
  read(control) {
    const text = control.value;
    if (text.trim() === "") return { omit: true };
    if (isExpr(control, text)) return { value: text };
    return { value: control.hasAttribute("data-json") ? JSON.parse(text) : text };
  },
  setLiteral(control, text) {
    const match = [...control.options].find((o) => o.value === text);
    control.value = match ? text : "";
  },
});

registerFieldKind("json", {
  read(control) {
    const text = control.value;
    if (text.trim() === "") return { omit: true };
    if (isExpr(control, text)) return { value: text };
    const bad = jsonError(text);
    // the one error of a JSON setting (the expression editor shows none of its own)
    if (bad) return { error: `Not valid JSON (line ${bad.line}, column ${bad.column}): ${bad.message}` };
    return { value: JSON.parse(text) };
  },
  literalText(control) {
    try {
      return control.value.trim() ? JSON.stringify(JSON.parse(control.value)) : "";
    } catch {
      return control.value;
    }
  },
});

// ------------------------------------------------------------------ durations

const UNIT_SECONDS = { ms: 0.001, s: 1, sec: 1, m: 60, min: 60, h: 3600, d: 86400 };

/** "1h 30m" -> {seconds: 5400}; "90" -> {seconds: 90}; junk -> {error}. */
export function parseDuration(text) {
  const source = text.trim().toLowerCase();
  if (source === "") return { empty: true };
  if (/^\d+(\.\d+)?$/.test(source)) return { seconds: Number(source) };
  const part = /(\d+(?:\.\d+)?)\s*(ms|sec|min|s|m|h|d)\s*/y;
  let seconds = 0;
  let at = 0;
  while (at < source.length) {
    part.lastIndex = at;
    const m = part.exec(source);
    if (!m) return { error: `Not a duration: "${text.trim()}" (use e.g. 30s, 5m, 1h 30m)` };
    seconds += Number(m[1]) * UNIT_SECONDS[m[2]];
    at = part.lastIndex;
  }
  return { seconds: Math.round(seconds * 1000) / 1000 };
}

/** 5400 -> "1h 30m"; 0.5 -> "0.5s" (the server's frontend.field_views.format_duration). */
export function formatDuration(seconds) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) return String(seconds ?? "");
  if (seconds < 1 || !Number.isInteger(seconds)) return `${seconds}s`;
  let rest = seconds;
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join(" ") || "0s";
}

registerFieldKind("duration", {
  read(control) {
    const text = control.value;
    if (isExpr(control, text)) return { value: text };
    const parsed = parseDuration(text);
    if (parsed.empty) return { omit: true };
    if (parsed.error) return { error: parsed.error };
    const min = control.dataset.min;
    if (min !== undefined && parsed.seconds < Number(min)) return { error: `Enter at least ${formatDuration(Number(min))}` };
    return { value: parsed.seconds };
  },
  literalText(control) {
    const parsed = parseDuration(control.value);
    return parsed.seconds !== undefined ? String(parsed.seconds) : control.value;
  },
  setLiteral(control, text) {
    const n = Number(text);
    control.value = text.trim() !== "" && Number.isFinite(n) ? formatDuration(n) : "";
  },
});

// ------------------------------------------------------------------ key/value tables

export function kvRow() {
  const row = document.createElement("div");
  row.className = "kv-row";
  const key = Object.assign(document.createElement("input"), { type: "text", className: "kv-key", placeholder: "key" });
  const value = Object.assign(document.createElement("input"), { type: "text", className: "kv-value", placeholder: "value" });
  key.setAttribute("aria-label", "Key");
  value.setAttribute("aria-label", "Value");
  const remove = Object.assign(document.createElement("button"), { type: "button", className: "kv-remove icon-btn", title: "Remove row", textContent: "×" });
  remove.setAttribute("aria-label", "Remove row");
  row.append(key, value, remove);
  return row;
}

/**
 * A key/value table's value: an object, or with data-ordered (an ordered field list,
 * designer_schema/ordered_fields.py) a list of {name, value} entries in row order, since
 * the server's storage does not keep an object's key order.
 */
function readKv(editor) {
  const valueKind = editor.dataset.valueKind || "auto";
  const ordered = editor.hasAttribute("data-ordered");
  const out = ordered ? [] : {};
  for (const row of editor.querySelectorAll(".kv-row")) {
    const key = row.querySelector(".kv-key").value.trim();
    if (!key) continue;
    const value = itemValue(row.querySelector(".kv-value").value, valueKind);
    if (ordered) out.push({ name: key, value });
    else out[key] = value;
  }
  return { value: out };
}

/** [[name, value]] of an object or an ordered field list. */
function kvEntries(value) {
  if (Array.isArray(value)) return value.filter((e) => e && typeof e.name === "string").map((e) => [e.name, e.value]);
  return value && typeof value === "object" ? Object.entries(value) : [];
}

/** A typed text as a value of `valueKind` (string, number, integer, boolean, auto). */
function itemValue(text, valueKind) {
  if (text.startsWith("=") || valueKind === "string") return text;
  if (valueKind === "number" || valueKind === "integer") {
    const n = Number(text);
    return text.trim() !== "" && Number.isFinite(n) ? n : text;
  }
  if (valueKind === "boolean") return text === "true" ? true : text === "false" ? false : text;
  // auto: JSON literals (numbers, true, null, {...}) are parsed, anything else is a string.
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

registerFieldKind("kv", {
  read: readKv,
  literalText(control) {
    const result = readKv(control);
    return kvEntries(result.value).length ? JSON.stringify(result.value) : "";
  },
  setLiteral(control, text) {
    const rows = control.querySelector(".kv-rows");
    rows.replaceChildren();
    const obj = parseJSONOr(text, null);
    if (obj && typeof obj === "object") {
      for (const [k, v] of kvEntries(obj)) {
        const row = kvRow();
        row.querySelector(".kv-key").value = k;
        row.querySelector(".kv-value").value = typeof v === "string" ? v : JSON.stringify(v);
        rows.appendChild(row);
      }
    }
  },
});

function parseJSONOr(text, fallback) {
  try {
    return JSON.parse(text);
  } catch {
    return fallback;
  }
}

// ------------------------------------------------------------------ chips (lists)

const EMAIL = /^[^\s@<>(),;:"]+@[^\s@<>(),;:"]+\.[^\s@<>(),;:"]+$/;

/** Why `text` cannot be an entry of `editor` (null when it can). */
function chipProblem(editor, text) {
  if (text.startsWith("=") && editor.hasAttribute("data-expression")) return null;
  const kind = editor.dataset.valueKind;
  if ((kind === "number" || kind === "integer") && !Number.isFinite(Number(text))) return `Not a number: ${text}`;
  if (kind === "integer" && !Number.isInteger(Number(text))) return `Not a whole number: ${text}`;
  if (editor.dataset.itemFormat === "email" && !EMAIL.test(text)) return `Not an email address: ${text}`;
  return null;
}

function chipElement(text) {
  const li = document.createElement("li");
  li.className = "value-chip";
  li.dataset.value = text;
  const span = Object.assign(document.createElement("span"), { className: "chip-text", textContent: text });
  const remove = Object.assign(document.createElement("button"), { type: "button", className: "chip-remove", title: "Remove", textContent: "×" });
  remove.setAttribute("aria-label", `Remove ${text}`);
  li.append(span, remove);
  return li;
}

function chipTexts(editor) {
  return [...editor.querySelectorAll(".value-chip")].map((li) => li.dataset.value);
}

/**
 * Turn the chip input's text into chips (split at commas, semicolons and new lines).
 * Returns false, leaving the bad part in the box with an error, when an entry is invalid.
 */
export function commitChips(editor) {
  const input = editor.querySelector(".chip-input");
  const parts = input.value.split(/[,;\n]/).map((p) => p.trim()).filter(Boolean);
  if (!parts.length) {
    input.value = "";
    return true;
  }
  const list = editor.querySelector(".chip-list");
  const rejected = [];
  let problem = null;
  for (const text of parts) {
    const why = chipProblem(editor, text);
    if (why) {
      problem = problem || why;
      rejected.push(text);
    } else if (!chipTexts(editor).includes(text)) {
      list.appendChild(chipElement(text));
    }
  }
  input.value = rejected.join(", ");
  markInvalid(input, problem);
  return !problem;
}

function readChips(editor) {
  const kind = editor.dataset.valueKind || "string";
  const values = chipTexts(editor).map((t) => itemValue(t, kind));
  return values.length ? { value: values } : { omit: true };
}

registerFieldKind("chips", {
  read: readChips,
  literalText(control) {
    const values = readChips(control).value;
    return values ? JSON.stringify(values) : "";
  },
  setLiteral(control, text) {
    const list = control.querySelector(".chip-list");
    list.replaceChildren();
    const parsed = parseJSONOr(text, text.trim() ? [text.trim()] : []);
    for (const v of Array.isArray(parsed) ? parsed : [parsed]) list.appendChild(chipElement(typeof v === "string" ? v : JSON.stringify(v)));
  },
});

/**
 * Keyboard of a chips editor. In the box: Enter, comma, semicolon or Tab (with text) add;
 * Backspace in an empty box focuses the last chip. On a chip: Delete/Backspace remove it,
 * arrows move between chips. Returns true when the event changed the entries.
 */
export function chipsKeydown(e) {
  const editor = e.target.closest(".chips-editor");
  if (!editor) return false;
  if (e.target.classList.contains("chip-input")) {
    const input = e.target;
    if ((e.key === "Enter" || e.key === "," || e.key === ";") || (e.key === "Tab" && input.value.trim())) {
      if (e.key !== "Tab" || input.value.trim()) e.preventDefault();
      return commitChips(editor) || true;
    }
    if (e.key === "Backspace" && input.value === "") {
      const last = editor.querySelector(".value-chip:last-child .chip-remove");
      if (last) {
        e.preventDefault();
        last.focus();
      }
    }
    return false;
  }
  const chip = e.target.closest(".value-chip");
  if (!chip) return false;
  if (e.key === "Delete" || e.key === "Backspace") {
    e.preventDefault();
    e.stopPropagation(); // the canvas's Delete must not remove the node
    removeChip(chip);
    return true;
  }
  if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
    e.preventDefault();
    e.stopPropagation(); // arrows would move the selected node

    const next = e.key === "ArrowLeft" ? chip.previousElementSibling : chip.nextElementSibling;
    (next ? next.querySelector(".chip-remove") : editor.querySelector(".chip-input")).focus();
  }
  return false;
}

/** Remove a chip, moving the focus to its neighbour (or the box). */
export function removeChip(chip) {
  const editor = chip.closest(".chips-editor");
  const next = chip.nextElementSibling || chip.previousElementSibling;
  chip.remove();
  (next ? next.querySelector(".chip-remove") : editor.querySelector(".chip-input")).focus();
}

// ------------------------------------------------------------------ groups (retry policy)

function readGroup(group) {
  const out = {};
  let error = null;
  for (const control of group.querySelectorAll("[data-subfield]")) {
    const result = readControl(control);
    markInvalid(control, result.error);
    if (result.error) error = error || result.error;
    else if (!result.omit) out[control.dataset.subfield] = result.value;
  }
  updateRetrySummary(group);
  if (error) return { error };
  return Object.keys(out).length ? { value: out } : { omit: true };
}

registerFieldKind("group", { read: readGroup });

/** "3 attempts: retries after 1s, 2s (±10 %)" under a retry group, from its fields. */
export function updateRetrySummary(group) {
  const out = group.querySelector(".retry-summary");
  if (!out) return;
  const num = (name) => {
    const control = group.querySelector(`[data-subfield="${name}"]`);
    if (!control) return NaN;
    const r = readControl(control);
    if (!r.omit) return Number(r.value);
    // empty: the default, shown as the placeholder
    return control.dataset.kind === "duration" ? Number(parseDuration(control.placeholder).seconds) : Number(control.placeholder);
  };
  const attempts = num("max_attempts");
  if (!Number.isInteger(attempts) || attempts < 1) {
    out.textContent = "";
    return;
  }
  if (attempts === 1) {
    out.textContent = "1 attempt: a failure is final (no retry).";
    return;
  }
  const first = num("initial_interval");
  const factor = num("backoff_coefficient");
  const cap = num("max_interval");
  const jitter = num("jitter");
  const waits = [];
  for (let n = 1; n < Math.min(attempts, 6); n++) waits.push(formatDuration(Math.round(Math.min(first * factor ** (n - 1), cap) * 1000) / 1000));
  const more = attempts > 6 ? ", …" : "";
  const spread = jitter > 0 ? ` (±${Math.round(jitter * 100)} %)` : "";
  out.textContent = `${attempts} attempts: retries after ${waits.join(", ")}${more}${spread}.`;
}

// ------------------------------------------------------------------ workflow picker

registerFieldKind("workflow", {
  read(control) {
    const id = control.dataset.value || "";
    return id ? { value: id } : { omit: true };
  },
});

// ------------------------------------------------------------------ errors

export function markInvalid(control, message) {
  const wrap = control.closest(".field");
  if (!wrap) return;
  // the value's own error and a helper box's (a rejected chip) are kept apart
  const source = control.hasAttribute("data-aux") ? "aux" : "value";
  let p = wrap.querySelector(`:scope > .field-error.parse-error[data-source="${source}"]`);
  control.classList.toggle("invalid", Boolean(message));
  if (message) control.setAttribute("aria-invalid", "true");
  else control.removeAttribute("aria-invalid");
  if (!message) {
    if (p) p.remove();
    return;
  }
  if (!p) {
    p = document.createElement("p");
    p.className = "field-error parse-error";
    p.dataset.source = source;
    p.setAttribute("role", "alert");
    wrap.appendChild(p);
  }
  p.textContent = message;
}
