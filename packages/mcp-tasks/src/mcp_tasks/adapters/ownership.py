"""Who owns a task: the authenticated principal of the SDK's auth, as one opaque string."""

from __future__ import annotations

import json

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components


def current_owner() -> str | None:
    """The principal of the current request (issuer, client id, subject), or ``None`` when
    the request is unauthenticated. JSON keeps the joined components unambiguous."""
    token = get_access_token()
    if token is None:
        return None
    client_id, issuer, subject = principal_components(token)
    return json.dumps([issuer, client_id, subject], separators=(",", ":"))
