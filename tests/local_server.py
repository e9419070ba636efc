"""The tests' stand-in servers: rehearse/localserver.py's server on 127.0.0.1 (a free port) in a
thread, each request's handler reaching the stand-in as `self.fake`."""
from __future__ import annotations

from rehearse import localserver


class LocalServer(localserver.LocalServer):
    """A context manager serving `handler` with `fake` set to the instance."""

    owner_attribute = "fake"
