"""How long a ``subscriptions/listen`` stream may run: while the token that opened it is
still good. A stream outlives no token: it ends at the token's ``expires_at``, and, where
the server's token verifier is known, as soon as a re-check finds the token refused
(revoked). See docs/serving.md, "Listen streams and tokens"."""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken, TokenVerifier

logger = logging.getLogger(__name__)


class ListenAuthority:
    """The authority a listen stream runs on: ``token``, re-checked every ``recheck_s``
    with ``verifier`` when the server's is known."""

    def __init__(
        self, token: AccessToken, verifier: TokenVerifier | None, *, recheck_s: float
    ) -> None:
        self.token = token
        self.verifier = verifier
        self.recheck_s = recheck_s

    def __repr__(self) -> str:  # never the token itself
        checked = self.verifier is not None
        return f"ListenAuthority(expires_at={self.token.expires_at}, rechecked={checked})"

    def _left_s(self) -> float:
        """Seconds until the token expires (infinite when it does not)."""
        expires_at = self.token.expires_at
        return math.inf if expires_at is None else expires_at - time.time()

    async def lapsed(self) -> None:
        """Returns once the token has expired, or the verifier refuses it (or fails to
        answer: a stream is not kept on a token nobody can vouch for)."""
        while True:
            left_s = self._left_s()
            if left_s <= 0:
                return
            if self.verifier is None:
                await anyio.sleep(left_s)
                continue
            await anyio.sleep(min(left_s, self.recheck_s))
            if self._left_s() <= 0:
                return
            try:
                still = await self.verifier.verify_token(self.token.token)
            except Exception as exc:  # the verifier's own failure (an introspection endpoint down)
                logger.warning(
                    "A listen stream ended: its token could not be checked again (%s)",
                    type(exc).__name__,
                )
                return
            if still is None:
                return
