// Extra sections of the trigger nodes' config panels, added when the server-rendered panel
// appears (panel.js stays unaware of them):
// - Webhook: URLs, the write-only secret, "Listen for test call" (shows the next request's
//   parsed run input for field mapping) and a link to the deliveries list.
// - Schedule: the next 10 fire times in the schedule's zone and in UTC
//   (POST /designer/schedule-preview, refreshed as the fields change).
// - A connector trigger (the form has data-trigger-kind): "Fetch test event" runs the draft
//   trigger's code once and pins the event on the node (POST /api/v1/workflows/{id}/trigger-
//   sample); an app webhook listens for the next delivery to its URL (GET .../trigger-sample
//   polled until something arrived); "Use example" pins the trigger's example event.
// The Run dialog's input is prefilled with the last test call's input.

import { errorMessage, getJSON, postJSON, putJSON } from "./api.js";

const POLL_MS = 1000;
const LISTEN_MS = 120000;

/**
 * @param {object} opts  save() -> Promise<bool> (the draft, before a fetch), onPinned()
 *   (pinned data changed), canEdit (the user may fetch test events)
 */
export function attachTriggerPanels(container, model, workflowId, opts = {}) {
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
    if (form.dataset.triggerKind) sampleSection(form, workflowId, opts);
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
    const resp = await getJSON(`/api/v1/workflows/${workflowId}/webhook`);
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
    const resp = await putJSON(`/api/v1/workflows/${workflowId}/webhook/secret`, { secret: secretInput.value });
    secretInput.value = "";
    secretState.textContent = resp.ok ? "Secret saved (it is never shown)." : errorMessage(resp);
  });

  listen.addEventListener("click", async () => {
    const before = (await getJSON(`/api/v1/workflows/${workflowId}/webhook/test-call`)).data;
    const resp = await postJSON(`/api/v1/workflows/${workflowId}/webhook/listen`, {});
    if (!resp.ok) {
      status.textContent = errorMessage(resp);
      return;
    }
    listen.disabled = true;
    status.textContent = "Listening: send a request to the test URL…";
    const deadline = Date.now() + LISTEN_MS;
    while (Date.now() < deadline && form.isConnected) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      const call = (await getJSON(`/api/v1/workflows/${workflowId}/webhook/test-call`)).data;
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
  const last = (await getJSON(`/api/v1/workflows/${workflowId}/webhook/test-call`)).data;
  if (last && last.received_at) showCall(last);
}

const SAMPLE_HINTS = {
  polling: "Fetch test event polls the app once now and pins the newest item as this trigger's output (nothing is stored and no run starts).",
  broker: "Fetch test event waits up to 30 s for the next message and pins it without acknowledging it, so it stays with the broker.",
  email: "Fetch test event waits up to 30 s for the next email and pins it without acknowledging it.",
  app_webhook: "Fetch test event listens for 2 minutes: send an event to the trigger URL (paste it into the app's settings) and it is pinned. Before the workflow is published no run starts.",
};

/** The "Test event" section of a connector trigger's panel. */
function sampleSection(form, workflowId, opts) {
  const kind = form.dataset.triggerKind;
  const nodeId = form.dataset.nodeId;
  if (!SAMPLE_HINTS[kind]) return;
  const box = section(form, "Test event", "trigger-sample-section");
  const url = el("p", { className: "small trigger-sample-url-line", hidden: kind !== "app_webhook" });
  const status = el("p", { className: "hint", id: "trigger-sample-status", role: "status" });
  const pick = el("select", { id: "trigger-sample-pick" });
  const pickRow = el("p", { className: "small trigger-sample-pick-row", hidden: true });
  pickRow.append(el("label", { htmlFor: "trigger-sample-pick" }, "Pin another item of the poll: "), pick);
  const output = el("pre", { className: "json mono small", id: "trigger-sample-output", hidden: true });
  const link = el("a", { href: `/workflows/${workflowId}/trigger`, className: "small" }, "Trigger status of the published version →");
  box.append(el("p", { className: "hint" }, SAMPLE_HINTS[kind]), url);
  let candidates = [];
  let listening = false;
  if (opts.canEdit) {
    const fetchBtn = el("button", { type: "button", className: "btn btn-small btn-accent", id: "trigger-sample-fetch" }, "Fetch test event");
    const exampleBtn = el("button", { type: "button", className: "btn btn-small", id: "trigger-sample-example", hidden: !("triggerExample" in form.dataset) }, "Use example");
    const stopBtn = el("button", { type: "button", className: "btn btn-small", id: "trigger-sample-stop", hidden: true }, "Stop listening");
    box.append(el("p", { className: "test-actions" }, undefined), status, pickRow, output, link);
    box.querySelector(".test-actions").append(fetchBtn, " ", exampleBtn, " ", stopBtn);
    fetchBtn.addEventListener("click", () => run("fetch", [fetchBtn, exampleBtn]));
    exampleBtn.addEventListener("click", () => run("example", [fetchBtn, exampleBtn]));
    stopBtn.addEventListener("click", async () => {
      listening = false;
      const resp = await postJSON(`/api/v1/workflows/${workflowId}/trigger-sample/stop`, {});
      if (resp.ok) show(resp.data);
    });
    pick.addEventListener("change", async () => {
      const chosen = candidates[Number(pick.value)];
      if (!chosen) return;
      const resp = await putJSON(`/api/v1/workflows/${workflowId}/pins/${encodeURIComponent(nodeId)}`, { data: chosen.data });
      if (!resp.ok) return say(errorMessage(resp), "error");
      showData(chosen.data);
      say(`Item ${chosen.id} is pinned.`, "ok");
      opts.onPinned?.();
    });

    async function run(mode, buttons) {
      for (const b of buttons) b.disabled = true;
      try {
        if (opts.save && !(await opts.save())) return say("Save the draft first: it could not be saved.", "error");
        say(mode === "fetch" && kind !== "app_webhook" ? "Fetching a test event…" : "Working…", "busy");
        let resp;
        try {
          resp = await postJSON(`/api/v1/workflows/${workflowId}/trigger-sample`, { node_id: nodeId, mode });
        } catch (err) {
          return say(err.message, "error");
        }
        if (!resp.ok) return say(errorMessage(resp), "error");
        show(resp.data);
        if (resp.data.status === "listening") await listen();
      } finally {
        for (const b of buttons) b.disabled = false;
      }
    }

    async function listen() {
      listening = true;
      stopBtn.hidden = false;
      const deadline = Date.now() + LISTEN_MS + 5000;
      while (listening && form.isConnected && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, POLL_MS));
        const resp = await getJSON(`/api/v1/workflows/${workflowId}/trigger-sample`);
        if (!resp.ok) continue;
        if (resp.data.status !== "listening") {
          show(resp.data);
          break;
        }
        show(resp.data);
      }
      listening = false;
      stopBtn.hidden = true;
    }
  } else {
    box.append(status, output, link);
  }

  function say(text, state) {
    status.textContent = text;
    status.dataset.state = state;
  }

  function showData(data) {
    output.textContent = JSON.stringify(data, null, 2);
    output.hidden = false;
  }

  function showUrl(data) {
    if (kind !== "app_webhook") return;
    url.replaceChildren();
    if (data.url) url.append("Trigger URL: ", el("code", { id: "trigger-sample-url" }, data.url));
    else url.textContent = "The trigger URL is made when you first fetch a test event (or publish), and stays the same.";
  }

  /** Show a SampleState: its message, the URL, the pinned data, the items to pick from. */
  function show(state) {
    showUrl(state);
    candidates = state.candidates || [];
    pick.replaceChildren(...candidates.map((c, i) => el("option", { value: String(i) }, `${i === 0 ? "Newest: " : ""}${c.id}`)));
    pickRow.hidden = candidates.length < 2;
    if (state.status === "listening") {
      const until = state.listening_until ? new Date(state.listening_until).toLocaleTimeString() : "";
      const heard = state.deliveries ? ` ${state.message}` : "";
      return say(`Listening for a test event until ${until}…${heard}`, "busy");
    }
    if (state.status === "pinned") {
      if (state.data !== null && state.data !== undefined) showData(state.data);
      opts.onPinned?.();
      return say(state.message || "Pinned as this trigger's output.", "ok");
    }
    if (state.status === "idle") return say(state.message || "", "");
    say(state.message || state.status, state.status === "empty" ? "" : "error");
  }

  getJSON(`/api/v1/workflows/${workflowId}/trigger-sample`).then((resp) => {
    if (!resp.ok || !form.isConnected) return;
    showUrl(resp.data);
    if (resp.data.status === "listening" && resp.data.node_id === nodeId) say("Listening for a test event…", "busy");
  });
}

function prefillRunInput(workflowId) {
  const runBtn = document.getElementById("run-btn");
  const input = document.getElementById("run-input");
  if (!runBtn || !input) return;
  runBtn.addEventListener("click", async () => {
    if (input.value.trim() !== "{}") return;
    const resp = await getJSON(`/api/v1/workflows/${workflowId}/webhook/test-call`);
    if (resp.ok && resp.data && resp.data.input && input.value.trim() === "{}") {
      input.value = JSON.stringify(resp.data.input, null, 2);
    }
  });
}
