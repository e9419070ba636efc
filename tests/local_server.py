"""An HTTP server on 127.0.0.1 (a free port) in a thread, for the stand-ins the tests talk to."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalServer:
    """A context manager serving `handler` with `fake` set to the instance."""

    handler: type[BaseHTTPRequestHandler]

    def __enter__(self):
        handler = type("Handler", (self.handler,), {"fake": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"
