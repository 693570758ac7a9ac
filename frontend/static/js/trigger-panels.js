// Extra sections of the trigger nodes' config panels, added when the server-rendered panel
// appears (panel.js stays unaware of them):
// - Webhook: URLs, the write-only secret, "Listen for test call" (shows the next request's
//   parsed run input for field mapping) and a link to the deliveries list.
// - Schedule: the next 10 fire times in the schedule's zone and in UTC
//   (POST /designer/schedule-preview, refreshed as the fields change).
// The Run dialog's input is prefilled with the last test call's input.

import { errorMessage, getJSON, postJSON, putJSON } from "./api.js";

const POLL_MS = 1000;
const LISTEN_MS = 120000;

export function attachTriggerPanels(container, model, workflowId) {
  let previewTimer = null;
  let previewSeq = 0;

  new MutationObserver(enhance).observe(container, { childList: true });
  const onEdit = () => {
    clearTimeout(previewTimer);
    previewTimer = setTimeout(refreshPreview, 300);
  };
  container.addEventListener("input", onEdit);
  container.addEventListener("change", onEdit);
  prefillRunInput(workflowId);

  function enhance() {
    const form = container.querySelector(".config-form");
    if (!form || form.dataset.triggerEnhanced) return;
    form.dataset.triggerEnhanced = "1";
    if (form.dataset.nodeType === "trigger.webhook") webhookSection(form, workflowId);
    if (form.dataset.nodeType === "trigger.schedule") {
      const box = section(form, "Next fire times", "schedule-section");
      box.appendChild(el("div", { id: "schedule-preview", className: "schedule-preview-box" }));
      refreshPreview();
    }
  }

  async function refreshPreview() {
    const form = container.querySelector('.config-form[data-node-type="trigger.schedule"]');
    const target = form && form.querySelector("#schedule-preview");
    const node = form && model.node(form.dataset.nodeId);
    if (!target || !node) return;
    const seq = ++previewSeq;
    const resp = await postJSON("/designer/schedule-preview", { config: node.config || {} });
    if (seq !== previewSeq) return;
    if (resp.ok) target.innerHTML = resp.text; // server-rendered, autoescaped fragment
    else target.textContent = errorMessage(resp);
  }
}

function el(tag, props = {}, text) {
  const node = Object.assign(document.createElement(tag), props);
  if (text !== undefined) node.textContent = text;
  return node;
}

function section(form, title, className) {
  const fs = el("fieldset", { className: `panel-section ${className}` });
  fs.appendChild(el("legend", {}, title));
  form.appendChild(fs);
  return fs;
}

async function webhookSection(form, workflowId) {
  const box = section(form, "Webhook", "webhook-section");
  const urls = el("div", { className: "webhook-urls small" });
  const secretState = el("p", { className: "hint", id: "webhook-secret-state" });
  const secretInput = el("input", {
    type: "password",
    id: "webhook-secret",
    autocomplete: "new-password",
    placeholder: "token, password or signing secret",
  });
  secretInput.setAttribute("aria-label", "Webhook secret");
  const saveSecret = el("button", { type: "button", className: "btn btn-small", id: "webhook-secret-save" }, "Save secret");
  const listen = el("button", { type: "button", className: "btn btn-small btn-accent", id: "webhook-listen" }, "Listen for test call");
  const status = el("p", { className: "hint", id: "webhook-test-status", role: "status" });
  const output = el("pre", { className: "json mono small", id: "webhook-test-output", hidden: true });
  const deliveries = el("a", { href: `/workflows/${workflowId}/deliveries`, className: "small" }, "Webhook deliveries (accepted and rejected) →");
  const secretRow = el("div", { className: "field" });
  secretRow.append(el("label", { htmlFor: "webhook-secret" }, "Secret (write-only)"), secretInput, saveSecret, secretState);
  box.append(urls, secretRow, listen, status, output, deliveries);

  async function loadInfo() {
    const resp = await getJSON(`/api/workflows/${workflowId}/webhook`);
    if (!resp.ok) return null;
    urls.replaceChildren(
      el("p", {}, "Production URL (published version):"),
      el("code", { className: "webhook-prod-url" }, resp.data.url),
      el("p", {}, "Test URL (draft settings, while listening):"),
      el("code", { className: "webhook-test-url" }, resp.data.test_url),
    );
    secretState.textContent = resp.data.secret_set ? "A secret is set (it is never shown)." : "No secret set.";
    return resp.data;
  }

  saveSecret.addEventListener("click", async () => {
    if (!secretInput.value) return;
    const resp = await putJSON(`/api/workflows/${workflowId}/webhook/secret`, { secret: secretInput.value });
    secretInput.value = "";
    secretState.textContent = resp.ok ? "Secret saved (it is never shown)." : errorMessage(resp);
  });

  listen.addEventListener("click", async () => {
    const before = (await getJSON(`/api/workflows/${workflowId}/webhook/test-call`)).data;
    const resp = await postJSON(`/api/workflows/${workflowId}/webhook/listen`, {});
    if (!resp.ok) {
      status.textContent = errorMessage(resp);
      return;
    }
    listen.disabled = true;
    status.textContent = "Listening: send a request to the test URL…";
    const deadline = Date.now() + LISTEN_MS;
    while (Date.now() < deadline && form.isConnected) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      const call = (await getJSON(`/api/workflows/${workflowId}/webhook/test-call`)).data;
      if (call && call.received_at && call.received_at !== before?.received_at) {
        showCall(call);
        listen.disabled = false;
        return;
      }
    }
    listen.disabled = false;
    status.textContent = "Stopped listening (no request within 2 minutes).";
  });

  function showCall(call) {
    if (call.error) {
      status.textContent = `Test call refused: ${call.error}`;
      output.hidden = true;
      return;
    }
    status.textContent = "Test call received. Map fields from this run input (e.g. =body.id):";
    output.textContent = JSON.stringify(call.input, null, 2);
    output.hidden = false;
  }

  await loadInfo();
  const last = (await getJSON(`/api/workflows/${workflowId}/webhook/test-call`)).data;
  if (last && last.received_at) showCall(last);
}

function prefillRunInput(workflowId) {
  const runBtn = document.getElementById("run-btn");
  const input = document.getElementById("run-input");
  if (!runBtn || !input) return;
  runBtn.addEventListener("click", async () => {
    if (input.value.trim() !== "{}") return;
    const resp = await getJSON(`/api/workflows/${workflowId}/webhook/test-call`);
    if (resp.ok && resp.data && resp.data.input && input.value.trim() === "{}") {
      input.value = JSON.stringify(resp.data.input, null, 2);
    }
  });
}
