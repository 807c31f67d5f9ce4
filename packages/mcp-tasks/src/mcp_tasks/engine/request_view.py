"""What the engine needs to know about one inbound request, independent of any SDK."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.shared.inbound import decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_tasks.engine.wire import EXTENSION_ID


@dataclass(frozen=True, slots=True)
class RequestView:
    """One request as the engine sees it. Adapters build it from their SDK's context.

    ``client_capabilities`` are this request's own (2026-07-28 capabilities are per
    request: a server must not infer them from earlier requests). ``headers`` is
    ``None`` off HTTP (stdio, in-memory), where there are no routing headers to check.
    """

    protocol_version: str | None
    client_capabilities: Mapping[str, Any] | None
    owner: str | None = None
    headers: Mapping[str, str] | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_modern(self) -> bool:
        """Whether the request speaks an era the extension acts on (2026-07-28)."""
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def declares_tasks(self) -> bool:
        """Whether this request declared the tasks extension."""
        return self.declares(EXTENSION_ID)

    def declares(self, extension: str) -> bool:
        """Whether this request declared ``extension``: its entry under
        ``capabilities.extensions`` must be a settings object (``{}`` means support with no
        settings). ``null`` or any other non-object value declares nothing."""
        caps = self.client_capabilities or {}
        extensions = caps.get("extensions")
        # ``type(...) is dict`` first: the parsed JSON of a request, and an ``isinstance``
        # of ``Mapping`` costs a poll as much as the rest of this.
        if type(extensions) is not dict and not isinstance(extensions, Mapping):
            return False
        entry = extensions.get(extension)
        return type(entry) is dict or isinstance(entry, Mapping)

    def header(self, name: str) -> str | None:
        """A header's value, with the ``=?base64?…?=`` sentinel decoded; ``None`` when absent."""
        if self.headers is None:
            return None
        raw = self.headers.get(name)
        if raw is None or not raw.startswith("=?"):
            return raw  # no sentinel: the value as sent (the SDK's rule; its regex costs a poll)
        return decode_header_value(raw)
