// The Webhook panel's "Body schema" helpers: infer the JSON Schema of the request body from
// the last test call, the newest run, or a pasted sample
// (POST /api/v1/workflows/{id}/expressions/infer-schema), and put it in the Body schema field,
// where it can be edited. Expressions reading body fields are then checked against it.

import { errorMessage, postJSON } from "./api.js";

export function attachBodySchema(form, workflowId) {
  const wrap = form.querySelector('[data-field-wrap="body_schema"]');
  const field = wrap && wrap.querySelector('[data-field="body_schema"]');
  if (!field) return;
  const box = document.createElement("div");
  box.className = "body-schema-tools";
  const status = document.createElement("p");
  status.className = "hint body-schema-status";
  status.setAttribute("aria-live", "polite");
  const sample = Object.assign(document.createElement("textarea"), {
    className: "mono body-schema-sample",
    rows: 4,
    placeholder: '{"customer": {"email": "ada@example.com"}, "qty": 2}',
    hidden: true,
  });
  sample.setAttribute("aria-label", "Sample body (JSON)");
  const buttons = [
    ["test_call", "Infer from test call"],
    ["last_run", "Infer from last run"],
    ["sample", "Infer from a sample…"],
  ].map(([source, text]) => {
    const b = Object.assign(document.createElement("button"), {
      type: "button",
      className: "btn btn-small body-schema-infer",
      textContent: text,
    });
    b.dataset.source = source;
    b.addEventListener("click", () => infer(source));
    return b;
  });
  box.append(...buttons, sample, status);
  wrap.appendChild(box);

  async function infer(source) {
    const body = { source };
    if (source === "sample") {
      if (sample.hidden || !sample.value.trim()) {
        sample.hidden = false;
        sample.focus();
        status.textContent = "Paste a request body, then press the button again.";
        return;
      }
      try {
        body.sample = JSON.parse(sample.value);
      } catch (err) {
        status.textContent = `The sample is not JSON: ${err.message}`;
        return;
      }
    }
    status.textContent = "Inferring…";
    let resp;
    try {
      resp = await postJSON(`/api/v1/workflows/${workflowId}/expressions/infer-schema`, body);
    } catch (err) {
      status.textContent = err.message;
      return;
    }
    if (!resp.ok) {
      status.textContent = errorMessage(resp);
      return;
    }
    field.value = JSON.stringify(resp.data.schema, null, 2);
    field.dispatchEvent(new Event("input", { bubbles: true }));
    status.textContent = `Schema inferred from the ${resp.data.source}; add any field the sample lacks.`;
  }
}
