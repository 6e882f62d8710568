"""Serving a Starlette app: loopback by default, any other address only with an access token.

Every web app (`aura view`, and those families' commands serve) starts through here, so the binding
rule is written once: on 127.0.0.1 / ::1 / localhost no login secret is needed; binding elsewhere is
refused unless a token is configured, and then every request must carry it (`?token=...` once, kept in
a cookie, or the `X-Aura-Token` header). Without a token a request must also name a loopback host (`Host:` 127.0.0.1,
localhost, [::1]), so a web page cannot reach the apps through DNS rebinding.
"""
from __future__ import annotations

import hmac
import ipaddress
import threading
from contextlib import contextmanager

from starlette.responses import PlainTextResponse

LOOPBACK_NAMES = {"localhost"}
COOKIE = "aura_token"


class BindRefused(Exception):
    """Binding to a non-loopback address without a token."""


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise BindRefused(f"refusing to bind {host}: only loopback addresses are served without a token "
                          f"(set a token to serve on another address)")


def host_name(header: str) -> str:
    """The host of a Host header without its port: 'localhost:8765' -> 'localhost', '[::1]:80' -> '::1'."""
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class TokenGate:
    """ASGI middleware: with a token set, a request needs it (query, cookie or header); without one, it must
    name a loopback host (DNS rebinding: a page on another site whose name resolves to 127.0.0.1)."""

    def __init__(self, app, token: str | None):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.requests import Request

        req = Request(scope)
        if not self.token:
            if is_loopback(host_name(req.headers.get("host", ""))):
                return await self.app(scope, receive, send)
            return await PlainTextResponse("this server answers only requests to 127.0.0.1 / localhost",
                                           status_code=403)(scope, receive, send)
        given = req.query_params.get("token") or req.cookies.get(COOKIE) or req.headers.get("x-aura-token") or ""
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return await PlainTextResponse("a valid token is required", status_code=401)(scope, receive, send)
        if req.query_params.get("token"):  # remember it for the pages and requests that follow

            async def send_with_cookie(message):
                if message["type"] == "http.response.start":
                    message.setdefault("headers", []).append(
                        (b"set-cookie", f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/".encode()))
                await send(message)

            return await self.app(scope, receive, send_with_cookie)
        return await self.app(scope, receive, send)


def _server(app, host: str, port: int, token: str | None):
    import uvicorn

    check_bind(host, token)
    return uvicorn.Server(uvicorn.Config(TokenGate(app, token), host=host, port=port, log_level="warning",
                                         lifespan="off"))


def serve(app, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> None:
    """Serve until Ctrl-C (the command-line path)."""
    server = _server(app, host, port, token)
    print(f"serving on http://{host}:{port}/  (Ctrl-C stops)", flush=True)
    server.run()


@contextmanager
def serving(app, host: str = "127.0.0.1", port: int = 0, token: str | None = None):
    """Serve in a background thread; yields the base URL, stops the server on exit (tests, screenshots)."""
    import socket
    import time

    if port == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    server = _server(app, host, port, token)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"web app did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
