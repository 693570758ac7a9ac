"""Where the compiler's checks put what they find: diagnostics in emission order."""

from __future__ import annotations

from designer_schema.diagnostics import Diagnostic, Severity


class DiagnosticSink:
    """Collects the compiler's diagnostics in emission order (:meth:`add`; read ``items``)."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def add(
        self,
        code: str,
        message: str,
        *,
        node_id: str | None = None,
        edge_id: str | None = None,
        field: str | None = None,
        severity: Severity = "error",
    ) -> None:
        """Record one diagnostic (severity ``error`` unless told)."""
        self.items.append(
            Diagnostic(
                severity=severity,
                code=code,
                message=message,
                node_id=node_id,
                edge_id=edge_id,
                field=field,
            )
        )

    @property
    def has_errors(self) -> bool:
        """True when any recorded diagnostic is an error (no graph is built then)."""
        return any(d.severity == "error" for d in self.items)
