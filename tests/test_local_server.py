"""rehearse/localserver.py: the one server lifecycle the rehearsal's Kubernetes API and the tests'
stand-ins share: HTTP or HTTPS on 127.0.0.1, a free port, closed on leaving."""
from __future__ import annotations

import socket
import ssl
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest

from rehearse.kubeapi import serving_certificate
from rehearse.localserver import LocalServer


class Reply(BaseHTTPRequestHandler):
    owner: "Replying"

    def do_GET(self) -> None:
        body = self.owner.reply.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


class Replying(LocalServer):
    handler = Reply

    def __init__(self, reply: str, tls=None):
        self.reply, self.tls = reply, tls


def refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_it_serves_http_through_its_owner_and_closes_its_port_on_leaving():
    with Replying("plain") as server:
        assert server.address == f"http://127.0.0.1:{server.port}"
        assert urllib.request.urlopen(server.address + "/", timeout=5).read() == b"plain"
    assert refused(server.port) and not server.thread.is_alive()


def test_it_serves_https_with_the_certificate_it_is_given(tmp_path):
    ca, certificate, key = serving_certificate(tmp_path)
    with Replying("secret", tls=(certificate, key)) as server:
        assert server.address == f"https://127.0.0.1:{server.port}"
        trusted = ssl.create_default_context(cafile=str(ca))
        assert urllib.request.urlopen(server.address + "/", timeout=5, context=trusted).read() == b"secret"
        with pytest.raises(OSError):  # plain HTTP is not answered, and the server goes on
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=5).read()
        assert urllib.request.urlopen(server.address + "/", timeout=5, context=trusted).read() == b"secret"
    assert refused(server.port)


def test_a_certificate_it_cannot_load_leaves_no_socket_open(tmp_path):
    server = Replying("never", tls=(tmp_path / "missing.crt", tmp_path / "missing.key"))
    with pytest.raises(OSError):
        server.__enter__()
    assert server.server.socket.fileno() == -1
