// The #diagnostics ("Problems") panel over the canvas. Clicking an entry focuses its node.
// The header button collapses the list (remembered in localStorage); the header keeps the
// number of problems and error / warning count badges visible while collapsed.

const COLLAPSED_KEY = "railyard.designer.problems-collapsed";

export class DiagnosticsList {
  constructor(root, { onFocus }) {
    this.root = root;
    this.list = root.querySelector("#diagnostics-list");
    this.count = root.querySelector("#diagnostics-count");
    this.toggle = root.querySelector("#diagnostics-toggle");
    this.errors = root.querySelector("#diagnostics-errors");
    this.warnings = root.querySelector("#diagnostics-warnings");
    this.onFocus = onFocus;
    this.list.addEventListener("click", (e) => {
      const li = e.target.closest("li.diagnostic");
      if (li && li.dataset.nodeId) this.onFocus(li.dataset.nodeId);
    });
    this.list.addEventListener("keydown", (e) => {
      const li = e.target.closest("li.diagnostic");
      if (li && li.dataset.nodeId && (e.key === "Enter" || e.key === " ")) {
        e.preventDefault();
        this.onFocus(li.dataset.nodeId);
      }
    });
    this.toggle.addEventListener("click", () => this.setCollapsed(!this.collapsed, true));
    this.setCollapsed(readCollapsed(), false);
  }

  get collapsed() {
    return this.root.classList.contains("collapsed");
  }

  setCollapsed(collapsed, remember) {
    this.root.classList.toggle("collapsed", collapsed);
    this.list.hidden = collapsed;
    this.toggle.setAttribute("aria-expanded", String(!collapsed));
    if (remember) {
      try {
        localStorage.setItem(COLLAPSED_KEY, collapsed ? "1" : "0");
      } catch {
        // storage disabled: the state lasts for this page only
      }
    }
  }

  show(diagnostics) {
    this.list.replaceChildren();
    let errors = 0;
    let warnings = 0;
    for (const d of diagnostics) {
      const severity = d.severity || "error";
      if (severity === "error") errors++;
      else warnings++;
      const li = document.createElement("li");
      li.className = `diagnostic severity-${severity}`;
      li.dataset.severity = severity;
      li.dataset.code = d.code || "";
      if (d.node_id) li.dataset.nodeId = d.node_id;
      if (d.edge_id) li.dataset.edgeId = d.edge_id;
      const where = document.createElement("span");
      where.className = "diagnostic-where";
      where.textContent = [d.node_id, d.field].filter(Boolean).join(" · ") || (d.edge_id ? `edge ${d.edge_id}` : "workflow");
      const msg = document.createElement("span");
      msg.className = "diagnostic-message";
      msg.textContent = d.message;
      li.append(where, msg);
      if (d.node_id) li.tabIndex = 0;
      this.list.appendChild(li);
    }
    this.count.textContent = problems(diagnostics.length);
    setBadge(this.errors, errors, "error");
    setBadge(this.warnings, warnings, "warning");
    this.root.classList.toggle("only-warnings", errors === 0 && warnings > 0);
    this.root.hidden = diagnostics.length === 0;
  }
}

function setBadge(badge, n, word) {
  badge.textContent = String(n);
  badge.title = `${n} ${word}${n === 1 ? "" : "s"}`;
  badge.setAttribute("aria-label", badge.title);
  badge.hidden = n === 0;
}

function readCollapsed() {
  try {
    return localStorage.getItem(COLLAPSED_KEY) === "1";
  } catch {
    return false;
  }
}

export function problems(n) {
  return `${n} ${n === 1 ? "problem" : "problems"}`;
}
