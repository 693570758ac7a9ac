// The #diagnostics list under the canvas. Clicking an entry focuses its node.

export class DiagnosticsList {
  constructor(root, { onFocus }) {
    this.root = root;
    this.list = root.querySelector("#diagnostics-list");
    this.count = root.querySelector("#diagnostics-count");
    this.onFocus = onFocus;
    this.list.addEventListener("click", (e) => {
      const li = e.target.closest("li.diagnostic");
      if (li && li.dataset.nodeId) this.onFocus(li.dataset.nodeId);
    });
  }

  show(diagnostics) {
    this.list.replaceChildren();
    for (const d of diagnostics) {
      const li = document.createElement("li");
      li.className = `diagnostic severity-${d.severity || "error"}`;
      li.dataset.severity = d.severity || "error";
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
    this.root.hidden = diagnostics.length === 0;
  }
}

export function problems(n) {
  return `${n} ${n === 1 ? "problem" : "problems"}`;
}
