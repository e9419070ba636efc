"""The model store's names, declared once: the roots of the bucket, the file names in it, and the
markers serve.sh leaves in a server's compile directory. Here, in modelstore/, because the store's
pods import only this package (modelstore/pod.py ships it as a ConfigMap); stackconfig/store.py
builds the layout from these names, components/pairing/serving.py renders them for serve.sh, and
tests/test_store_names.py fails if a second literal of one of them appears in the program."""
from __future__ import annotations

import shlex

WEIGHTS_ROOT = "weights/"
COMPILED_ROOT = "compiled/"
STAGING_ROOT = "staging/"
FILES_DIR = "files"
"""Below a prepared model's prefix and a committed or staged set: the files the engines load."""
MANIFEST_FILE = "manifest.json"
"""Every file of a prepared model or a staging set, with its size and sha256."""
WEIGHTS_MARKER = ".complete"
"""Written last, by exactly one preparation: the prepared model is complete (serve.sh waits for it)."""
COMMIT_FILE = "commit.json"
"""The staging set that won a compiled artifact path, written once (modelstore/publish.py)."""
COMPLETE_FILE = "complete.json"
"""Written once the committed set is copied in place under the path's FILES_DIR."""
LOCAL_COMPLETE = ".complete"
"""serve.sh's marker in a node-cache directory: a complete copy (weights or compiled set) is there."""
LOCAL_RESTORED = ".restored"
"""serve.sh's marker in the compile directory: the set came from the store (nothing to publish)."""

SHELL_NAMES = {"FILES_DIR": FILES_DIR, "WEIGHTS_MARKER": WEIGHTS_MARKER, "COMMIT_FILE": COMMIT_FILE,
               "COMPLETE_FILE": COMPLETE_FILE, "LOCAL_COMPLETE": LOCAL_COMPLETE, "LOCAL_RESTORED": LOCAL_RESTORED}
"""The names serve.sh reads, rendered beside it as shell assignments (components/pairing/serving.py)."""


def shell_assignments() -> str:
    """SHELL_NAMES as a file serve.sh sources, one `NAME=value` line each."""
    return "".join(f"{name}={shlex.quote(value)}\n" for name, value in SHELL_NAMES.items())
