"""The model store's layout: where prepared weights, compiled artifacts and their staging sets live
in the platform's bucket, and what marks each complete. One home for these names: the program
renders them, the preparation and publication code (modelstore/) writes them, serve.sh reads them.

    weights/<model>/<revision>/<form>/files/...      prepared weights, as the engines load them
    weights/<model>/<revision>/<form>/manifest.json   every file with its size and sha256
    weights/<model>/<revision>/<form>/.complete       written last, by exactly one preparation
    staging/<artifact path>/<set>/...                  one writer's compiled set (expires)
    compiled/<...>/commit.json                        the set that won, written once
    compiled/<...>/files/...  and  complete.json      the committed set, copied in place

Prepared weights and committed sets are content-addressed (model, revision and form; compile
settings), so pairings on one platform that need the same thing share it, and nothing is ever
overwritten with something else or deleted by a server.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from .catalog import ModelInfo
from .naming import slug

WEIGHTS_ROOT = "weights/"
COMPILED_ROOT = "compiled/"
STAGING_ROOT = "staging/"
SERVED_ROOTS = (WEIGHTS_ROOT, COMPILED_ROOT, STAGING_ROOT)
"""What the servers read through Mountpoint. Results and the benchmark's caches are never mounted."""
MODEL_STORE_MOUNT_PATH = "/var/mdl"
"""Where a server sees the store: each prefix it reads at the same path below this as in the bucket."""
MANIFEST_FILE = "manifest.json"
WEIGHTS_MARKER = ".complete"
COMMIT_FILE = "commit.json"
COMPLETE_FILE = "complete.json"
FILES_DIR = "files"
STAGING_EXPIRY_DAYS = 7
"""A staging set nobody committed (a writer killed before its commit, or the loser of one), or one
already copied into place, is expired by the bucket's lifecycle rule this many days after upload; a
set a commit names is tagged out of that rule until it is in place (modelstore/publish.py)."""

UNPINNED_REVISION = "main"
"""A model with no pinned hub commit is prepared from `main` as it is when the preparation first
runs; the manifest records that commit, and the prepared set is never replaced."""
_COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")

Form = Literal["hub", "neuron-fp8"]
"""hub: the repository's files as they are. neuron-fp8: an FP8 checkpoint rescaled to Neuron's
FP8 range, with its modules_to_not_convert file (modelstore/fp8.py)."""


def is_commit(revision: str) -> bool:
    return bool(_COMMIT_SHA.match(revision))


@dataclass(frozen=True)
class PreparedModel:
    """One model as the store holds it, prepared once for every pairing that needs it."""

    model: str
    revision: str
    """A hub commit sha, or UNPINNED_REVISION."""
    form: Form
    info: ModelInfo
    bf16_modules: tuple[str, ...] = ()
    """neuron-fp8: what the program tells NxD Inference to keep in BF16; the preparation checks
    the checkpoint keeps exactly these, and writes them to modules_to_not_convert.json."""

    @property
    def prefix(self) -> str:
        return f"{WEIGHTS_ROOT}{slug(self.model)}/{self.revision}/{self.form}/"

    @property
    def files_prefix(self) -> str:
        return f"{self.prefix}{FILES_DIR}/"

    @property
    def job_name(self) -> str:
        """A Job name (a DNS label of at most 63 characters) unique per prepared model."""
        digest = hashlib.sha256(self.prefix.encode()).hexdigest()[:8]
        return f"prepare-{slug(self.model)[:44].rstrip('-')}-{digest}"

    @property
    def checkpoint_gib(self) -> int:
        """The checkpoint's size, from its parameter count and dtype (1 byte per FP8 parameter, 2 per
        BF16), rounded up: what the preparation downloads and uploads."""
        per_parameter = 1 if self.info.checkpoint_dtype == "fp8" else 2
        return max(1, -(-int(self.info.params_billion * per_parameter * 1e9) // 2 ** 30))

    @property
    def disk_gib(self) -> int:
        """Local disk the preparation needs: the download, plus the rescaled copy for neuron-fp8,
        with a tenth to spare."""
        copies = 2 if self.form == "neuron-fp8" else 1
        return -(-self.checkpoint_gib * copies * 11 // 10)


def staging_prefix(artifact_path: str) -> str:
    return f"{STAGING_ROOT}{artifact_path}/"


@dataclass(frozen=True)
class StoreMount:
    """One read-only window onto the store: a Mountpoint volume limited to one prefix (the
    driver's `prefix` mount option), mounted at the prefix's own path below MODEL_STORE_MOUNT_PATH,
    so a server sees only what it loads and the paths serve.sh reads do not change."""

    prefix: str

    def __post_init__(self):
        if not (self.prefix.endswith("/") and self.prefix.startswith(SERVED_ROOTS)):
            raise ValueError(f"not a served store prefix: {self.prefix!r}")

    @property
    def kind(self) -> str:
        return self.prefix.split("/", 1)[0]

    @property
    def key(self) -> str:
        """Short, stable and unique per prefix: a pod volume's name (a DNS label, at most 63)."""
        return f"{self.kind}-{hashlib.sha256(self.prefix.encode()).hexdigest()[:10]}"

    @property
    def claim_name(self) -> str:
        return f"store-{self.key}"

    @property
    def mount_path(self) -> str:
        return f"{MODEL_STORE_MOUNT_PATH}/{self.prefix.rstrip('/')}"

