"""A local HTTP server for download tests: serves a folder on 127.0.0.1 and counts GET requests per
path (the `http` fixture), and `tar_gz` to write an archive into it. Used by the tests of the core's
fetch (tests/core/test_fetch.py) and of families that download their data."""
from __future__ import annotations

import functools
import io
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


def tar_gz(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tf.addfile(info, io.BytesIO(data))
    return path


class Server:
    """Serves a folder on 127.0.0.1 and counts GET requests per path."""

    def __init__(self, root: Path):
        self.root = root
        self.requests: list[str] = []
        srv = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                srv.requests.append(self.path)
                super().do_GET()

            def log_message(self, *args):  # keep test output quiet
                pass

        handler = functools.partial(Handler, directory=str(root))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.02}, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"


@pytest.fixture
def http(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    srv = Server(root)
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()
        srv.thread.join(timeout=5)
