"""The ``mcp-tasks doctor`` row both SQL dialects share: the state of the namespace's schema."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp_tasks.stores.doctor_rows import DiagnosisRow


def schema_row(where: str, missing: list[str], counted: int | None) -> DiagnosisRow:
    """The ``schema`` row of namespace ``where``: the tables and indexes ``missing`` from
    the catalog, and the row counter's count (``None``: no counter row)."""
    if missing:
        return ("schema", "fail", f"{where}: missing {', '.join(missing)}; run mcp-tasks migrate")
    if counted is None:
        return ("schema", "fail", f"{where}: the row counter is missing; run mcp-tasks migrate")
    tasks = f"{counted} task{'s' if counted != 1 else ''}"
    return (
        "schema",
        "ok",
        f"{where}: every table and index present; the row counter says {tasks} "
        "(expired ones count until reaped)",
    )
