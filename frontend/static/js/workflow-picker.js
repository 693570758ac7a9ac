// Workflow pickers in the config panel (Sub-workflow and For each "Workflow" fields): a
// combobox over GET /designer/workflow-options?q=...&exclude=<this workflow>, a
// server-rendered list of the workflows the user may run. Mouse: click an option. Keyboard:
// type to search, ArrowDown/ArrowUp move, Enter picks, Escape closes. The chosen id is kept
// in the picker's data-value (read back by fields.js, kind "workflow").

import { request } from "./api.js";

const SEARCH_DELAY_MS = 150;

export function attachWorkflowPickers(container, { workflowId, onPick }) {
  let timer = null;
  let seq = 0;

  container.addEventListener("input", (e) => {
    const input = e.target.closest(".workflow-search");
    if (!input) return;
    clearTimeout(timer);
    timer = setTimeout(() => search(input.closest(".workflow-picker")), SEARCH_DELAY_MS);
  });
  container.addEventListener("focusin", (e) => {
    const input = e.target.closest(".workflow-search");
    if (input && input.closest(".workflow-picker").querySelector(".workflow-options").hidden) {
      search(input.closest(".workflow-picker"), "");
    }
  });
  container.addEventListener("focusout", (e) => {
    const picker = e.target.closest(".workflow-picker");
    if (picker && !picker.contains(e.relatedTarget)) close(picker, true);
  });
  container.addEventListener("mousedown", (e) => {
    // keep the focus in the search box while an option is clicked
    if (e.target.closest(".workflow-options [role=option]")) e.preventDefault();
  });
  container.addEventListener("click", (e) => {
    const input = e.target.closest(".workflow-search");
    if (input && input.closest(".workflow-picker").querySelector(".workflow-options").hidden) {
      return search(input.closest(".workflow-picker"), "");
    }
    const option = e.target.closest(".workflow-options [role=option]");
    if (option) return pick(option.closest(".workflow-picker"), option);
    const clear = e.target.closest(".workflow-clear");
    if (clear) {
      const picker = clear.closest(".workflow-picker");
      setChoice(picker, "", "");
      picker.querySelector(".workflow-search").focus();
    }
  });
  container.addEventListener("keydown", (e) => {
    const input = e.target.closest(".workflow-search");
    if (!input) return;
    const picker = input.closest(".workflow-picker");
    const list = picker.querySelector(".workflow-options");
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      if (list.hidden) return search(picker, "");
      move(picker, e.key === "ArrowDown" ? 1 : -1);
    } else if (e.key === "Enter") {
      e.preventDefault();
      const active = list.querySelector('[aria-selected="true"]') || (list.hidden ? null : list.querySelector("[role=option]"));
      if (active) pick(picker, active);
    } else if (e.key === "Escape" && !list.hidden) {
      e.preventDefault();
      e.stopPropagation();
      close(picker, true);
    }
  });

  async function search(picker, query) {
    const input = picker.querySelector(".workflow-search");
    const q = query ?? input.value;
    const mine = ++seq;
    const params = new URLSearchParams({ q: q === input.dataset.chosenName ? "" : q, selected: picker.dataset.value || "" });
    if (workflowId) params.set("exclude", workflowId);
    let resp;
    try {
      resp = await request("GET", `/designer/workflow-options?${params}`, undefined, { accept: "text/html" });
    } catch (err) {
      return showMessage(picker, err.message);
    }
    if (mine !== seq) return;
    if (!resp.ok) return showMessage(picker, `Could not load workflows (${resp.status})`);
    const list = picker.querySelector(".workflow-options");
    list.innerHTML = resp.text; // server-rendered, autoescaped fragment
    list.hidden = false;
    input.setAttribute("aria-expanded", "true");
    const current = list.querySelector(`[data-value="${CSS.escape(picker.dataset.value || "")}"]`);
    highlight(picker, current || list.querySelector("[role=option]"));
  }

  function move(picker, step) {
    const options = [...picker.querySelectorAll(".workflow-options [role=option]")];
    if (!options.length) return;
    const at = options.findIndex((o) => o.getAttribute("aria-selected") === "true");
    highlight(picker, options[(at + step + options.length) % options.length]);
  }

  function highlight(picker, option) {
    const input = picker.querySelector(".workflow-search");
    for (const o of picker.querySelectorAll(".workflow-options [role=option]")) o.setAttribute("aria-selected", String(o === option));
    if (option) {
      input.setAttribute("aria-activedescendant", option.id);
      option.scrollIntoView({ block: "nearest" });
    } else {
      input.removeAttribute("aria-activedescendant");
    }
  }

  function pick(picker, option) {
    setChoice(picker, option.dataset.value, option.dataset.name);
    close(picker, false);
  }

  function setChoice(picker, id, name) {
    picker.dataset.value = id;
    const input = picker.querySelector(".workflow-search");
    input.value = name;
    input.dataset.chosenName = name;
    picker.querySelector(".workflow-clear").hidden = !id;
    const chosen = picker.querySelector(".workflow-chosen");
    chosen.replaceChildren();
    if (id) {
      const link = Object.assign(document.createElement("a"), { className: "workflow-open", href: `/workflows/${id}/designer`, textContent: `Open ${name}` });
      chosen.appendChild(link);
    }
    onPick(picker);
  }

  /** Close the list; `restore` puts the chosen workflow's name back into the box. */
  function close(picker, restore) {
    const list = picker.querySelector(".workflow-options");
    const input = picker.querySelector(".workflow-search");
    list.hidden = true;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
    if (restore) input.value = picker.dataset.value ? input.dataset.chosenName ?? input.value : "";
  }

  function showMessage(picker, text) {
    const list = picker.querySelector(".workflow-options");
    list.replaceChildren(Object.assign(document.createElement("li"), { className: "workflow-option-empty", textContent: text }));
    list.hidden = false;
  }
}
