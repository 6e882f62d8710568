"""The binding rule both web apps share: loopback without a token; elsewhere only with one, checked per request."""
import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from aura.web.serve import BindRefused, check_bind, serving


def _app():
    return Starlette(routes=[Route("/", lambda request: PlainTextResponse("ok"))])


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_needs_no_token(host):
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.org"])
def test_other_addresses_refused_without_token(host):
    with pytest.raises(BindRefused, match=f"refusing to bind {host}"):
        check_bind(host, None)
    check_bind(host, "s3cret")  # with a token it is allowed


def test_token_checked_on_every_request_and_kept_in_a_cookie():
    with serving(_app(), token="s3cret") as url:
        assert httpx.get(url + "/").status_code == 401
        assert httpx.get(url + "/?token=wrong").status_code == 401
        with httpx.Client() as c:
            first = c.get(url + "/?token=s3cret")
            assert (first.status_code, first.text) == (200, "ok")
            assert c.get(url + "/").status_code == 200  # the cookie carries it
        assert httpx.get(url + "/", headers={"X-Aura-Token": "s3cret"}).status_code == 200


def test_no_token_on_loopback_serves_everyone():
    with serving(_app()) as url:
        assert httpx.get(url + "/").text == "ok"


def test_without_a_token_only_requests_to_a_loopback_host_are_answered():
    with serving(_app()) as url:
        port = url.rsplit(":", 1)[1]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
            assert httpx.get(url + "/", headers={"Host": host}).status_code == 200, host
        # DNS rebinding: a page of another site whose name now resolves to 127.0.0.1
        for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.attacker.example:{port}"):
            assert httpx.get(url + "/", headers={"Host": host}).status_code == 403, host
