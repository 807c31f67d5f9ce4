"""The TCP socket an ASGI server (uvicorn) serves on when we bind it ourselves."""

from __future__ import annotations

import socket

#: uvicorn's own default backlog.
BACKLOG = 2048


def tcp_listener(host: str, port: int, *, backlog: int = BACKLOG) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: a free one) and listening, to hand to
    ``uvicorn.Server.serve(sockets=[...])``.

    Its protocol is named ``IPPROTO_TCP``: asyncio turns Nagle's algorithm off
    (``TCP_NODELAY``) on each accepted connection only when the listening socket says it is
    TCP, and ``socket.socket(family, SOCK_STREAM)`` or ``socket.create_server`` leave it 0.
    With Nagle on, an answer written in two parts (headers, then body) waits for the
    client's delayed ACK: about 40 ms per request on a kept-alive connection. (uvloop sets
    it on every accepted connection itself.) Set on the listener too: Linux hands it down
    to each connection it accepts, whatever the event loop does.

    Raises:
        OSError: the address cannot be resolved or bound.
    """
    family, _, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )[0]
    sock = socket.socket(family, socket.SOCK_STREAM, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock
