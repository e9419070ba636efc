"""The model store's layout: where prepared weights, compiled artifacts and their staging sets live
in the platform's bucket, and what marks each complete. One home for this layout: the program
renders it, the preparation and publication code (modelstore/) writes to it, serve.sh reads it.

    weights/<model>/<revision>/<form>/files/...      prepared weights, as the engines load them
    weights/<model>/<revision>/<form>/manifest.json   every file with its size and sha256
    weights/<model>/<revision>/<form>/.complete       written last, by exactly one preparation
    staging/<artifact path>/<set>/...                  one writer's compiled set (expires)
    compiled/<...>/commit.json                        the set that won, written once
    compiled/<...>/files/...  and  complete.json      the committed set, copied in place

Prepared weights and committed sets are content-addressed (model, revision and form; compile
settings), so pairings on one platform that need the same thing share it, and nothing is ever
overwritten with something else or deleted by a server. The names themselves (roots, files,
markers) are declared once in modelstore/layout.py, which the store's pods import alone.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Iterable, Literal

from modelstore.layout import COMPILED_ROOT, FILES_DIR, STAGING_ROOT, WEIGHTS_ROOT

from .catalog import ModelInfo
from .naming import slug

SERVED_ROOTS = (WEIGHTS_ROOT, COMPILED_ROOT, STAGING_ROOT)
"""What the servers read through Mountpoint. Results and the benchmark's caches are never mounted."""
MODEL_STORE_MOUNT_PATH = "/var/mdl"
"""Where a server sees the store: each prefix it reads at the same path below this as in the bucket."""
NODE_CACHE_MOUNT = "/node-cache"
"""Where a server sees its cache on the node's NVMe: the store's objects copied there, its compiled set."""
STAGING_EXPIRY_DAYS = 7
"""A staging set nobody committed (a writer killed before its commit, or the loser of one), or one
already copied into place, is expired by the bucket's lifecycle rule this many days after upload; a
set a commit names is tagged out of that rule until it is in place (modelstore/publish.py)."""

UNPINNED_REVISION = "main"
"""A model with no pinned hub commit is prepared from `main` as it is when the preparation first
runs; the manifest records that commit, and the prepared set is never replaced."""
_COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")

PREPARATION_STREAMS = 4
"""Files a preparation downloads, verifies, rescales and uploads at once, each from its own
connection: enough to fill a 25 Gbit/s node from the hub's CDN, few enough that the bound stays small."""
HUB_SHARD_BYTES = 5 * 10 ** 9
"""The largest shard assumed: transformers' save_pretrained splits checkpoints at max_shard_size
"5GB" (decimal) by default, and Meta's 405B BF16 checkpoint is 191 shards of ~4.25 GB; the
largest single tensor of the catalog (the 405B's embedding, 4.2 GB in BF16) is below it. A
larger file runs with fewer files in flight; one that alone exceeds the bound fails the
preparation before anything is downloaded, naming the file (modelstore/prepare.py)."""
SAFETENSORS_HEADER_BYTES = 16 * 2 ** 20
"""A shard's JSON header (tensor names, dtypes, offsets): a few hundred KiB for the 405B's; room to spare."""

Form = Literal["hub", "neuron-fp8"]
"""hub: the repository's files as they are. neuron-fp8: an FP8 checkpoint rescaled to Neuron's
FP8 range, with its modules_to_not_convert file (modelstore/fp8.py)."""


def is_commit(revision: str) -> bool:
    return bool(_COMMIT_SHA.match(revision))


def unpinned(models: Iterable[PreparedModel]) -> list[str]:
    """The models prepared from `main` (no commit in `modelRevisions`): what `make lock` pins."""
    return sorted({m.model for m in models if m.revision == UNPINNED_REVISION})


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
    def checkpoint_bytes(self) -> int:
        """What the preparation downloads and uploads and each server copies (stackconfig/catalog.py
        Checkpoint: read from the model's safetensors index, or computed from its config and dtypes)."""
        if self.info.checkpoint is None:
            raise ValueError(f"{self.model}: its checkpoint size is unknown (validation refuses such a model)")
        return self.info.checkpoint.bytes

    @property
    def checkpoint_gib(self) -> int:
        return gib(self.checkpoint_bytes)

    @property
    def copies_in_flight(self) -> int:
        """Local copies of one file while it is prepared: the download, and its rescaled copy for neuron-fp8."""
        return 2 if self.form == "neuron-fp8" else 1

    @property
    def largest_file_bytes(self) -> int:
        """The largest file the preparation holds: a shard (the hub's checkpoints are sharded below
        HUB_SHARD_BYTES), or the whole checkpoint when it is smaller, plus its JSON header."""
        return min(self.checkpoint_bytes, HUB_SHARD_BYTES) + SAFETENSORS_HEADER_BYTES

    @property
    def scratch_bytes(self) -> int:
        """Local disk the preparation may fill, whatever the model's size: PREPARATION_STREAMS files
        in flight, each with its copies (modelstore/prepare.py holds to it)."""
        return PREPARATION_STREAMS * self.copies_in_flight * self.largest_file_bytes

    @property
    def disk_gib(self) -> int:
        """The scratch volume: the bound, with a tenth to spare (the file system's own blocks)."""
        return gib(self.scratch_bytes * 11 // 10)


def gib(count: int) -> int:
    """Bytes in GiB, rounded up, at least 1."""
    return max(1, -(-count // 2 ** 30))


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

