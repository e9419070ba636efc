"""An HTTP server on 127.0.0.1, on a free port, in a thread of this process; HTTPS when given a
certificate. The rehearsal's Kubernetes API stand-in (rehearse/kubeapi.py) runs on it, and so do
the tests' stand-ins (tests/local_server.py): one lifecycle, bound, served and closed one way."""
from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class LocalServer:
    """A context manager serving `handler` until it is left. Each request's handler reaches this
    object as its attribute `owner_attribute` (a subclass of `handler` made on entry carries it)."""

    handler: type[BaseHTTPRequestHandler]
    owner_attribute = "owner"
    tls: tuple[Path, Path] | None = None
    """(certificate, key), PEM files: serve HTTPS."""
    poll_s = 0.05
    """How often serve_forever looks for shutdown(): about what leaving the context waits."""

    def __enter__(self):
        handler = type("Handler", (self.handler,), {self.owner_attribute: self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # its request threads are daemons
        if self.tls:
            try:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(str(self.tls[0]), str(self.tls[1]))
                self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            except BaseException:
                self.server.server_close()
                raise
        self.thread = threading.Thread(target=self.server.serve_forever, args=(self.poll_s,), daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def address(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"
