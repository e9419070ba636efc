"""modelstore/prepare.py against a stand-in hub on 127.0.0.1 and moto's S3: a model prepared once,
verified file by file, uploaded through the S3 API with its manifest and then, last, its marker;
nothing marked when anything fails; FP8 rescaled for Neuron with the modules it keeps in BF16."""
from __future__ import annotations

import contextlib
import json
import struct

import ml_dtypes
import numpy as np
import pytest

from modelstore import fp8, prepare
from modelstore.hub import Hub
from rehearse.hub import LocalHub, Repository, lfs_sha256

BUCKET, PREFIX = "models", "weights/org-model/main/hub/"
CONFIG = b'{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}'
FILES = {"config.json": CONFIG, "tokenizer.json": b'{"model": {}}', "model-00001-of-00002.safetensors": b"A" * 3000,
         "model-00002-of-00002.safetensors": b"B" * 5000, "README.md": b"# not loaded",
         "original/consolidated.00.pth": b"not loaded either"}


class Recording:
    """A boto3 client whose writes are logged in order (put_object, upload_file, copy)."""

    def __init__(self, client):
        self.client, self.writes = client, []

    def __getattr__(self, name):
        method = getattr(self.client, name)
        if name == "put_object":
            return lambda **kw: (self.writes.append(kw["Key"]), method(**kw))[1]
        if name == "upload_file":
            return lambda path, bucket, key, **kw: (self.writes.append(key), method(path, bucket, key, **kw))[1]
        return method


@pytest.fixture
def s3(models_bucket):
    return Recording(models_bucket)


def run(s3, hub_url, tmp_path, *extra, model="org/model", revision="main", form="hub", prefix=PREFIX, token=None):
    argv = ["--model", model, "--revision", revision, "--form", form, "--bucket", BUCKET, "--prefix", prefix,
            "--work-dir", str(tmp_path / "work"), "--parallel", "3", "--scratch-bytes", str(10 ** 6), *extra]
    return prepare.main(argv, client=s3, hub=Hub(hub_url, token, sleep=lambda s: None))


def keys(s3) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def test_a_model_is_uploaded_verified_then_its_manifest_then_its_marker(s3, tmp_path, capsys):
    repo = Repository(dict(FILES))
    with LocalHub({"org/model": repo}) as hub:
        assert run(s3, hub.url, tmp_path) == 0
    loaded = {"config.json", "tokenizer.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
    assert keys(s3) == {PREFIX + "files/" + f for f in loaded} | {PREFIX + "manifest.json", PREFIX + ".complete"}
    # Every file before the manifest, the manifest before the marker.
    assert s3.writes[-2:] == [PREFIX + "manifest.json", PREFIX + ".complete"]
    assert set(s3.writes[:-2]) == {PREFIX + "files/" + f for f in loaded}
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"].read())
    assert (manifest["commit"], manifest["revision"], manifest["form"]) == (repo.commit, "main", "hub")
    assert {f["path"]: f["sha256"] for f in manifest["files"]}["model-00002-of-00002.safetensors"] == lfs_sha256(b"B" * 5000)
    assert manifest["bytes"] == sum(len(FILES[f]) for f in loaded)
    assert json.loads(s3.get_object(Bucket=BUCKET, Key=PREFIX + ".complete")["Body"].read())["commit"] == repo.commit
    out = capsys.readouterr().out
    assert "download: " in out and "upload: " in out and "/s" in out and f"commit {repo.commit}" in out


@pytest.mark.parametrize("corrupt", ["model-00002-of-00002.safetensors", "config.json"])
def test_a_file_that_does_not_verify_leaves_no_marker_and_fails(s3, tmp_path, capsys, corrupt):
    with LocalHub({"org/model": Repository(dict(FILES), corrupt=corrupt)}) as hub:
        assert run(s3, hub.url, tmp_path) == 1
    assert not {PREFIX + ".complete", PREFIX + "manifest.json"} & keys(s3)
    error = capsys.readouterr().err
    kind = "sha256" if corrupt.endswith(".safetensors") else "git blob id"
    assert f"prepare: org/model@main (hub) failed: {corrupt} does not verify" in error and kind in error


def test_a_prepared_model_is_not_prepared_again(s3, tmp_path, capsys):
    s3.put_object(Bucket=BUCKET, Key=PREFIX + ".complete", Body=b"{}")
    repo = Repository(dict(FILES))
    with LocalHub({"org/model": repo}) as hub:
        assert run(s3, hub.url, tmp_path) == 0
    assert repo.requests == [] and "already prepared" in capsys.readouterr().out


def test_a_preparation_that_loses_the_race_leaves_the_winners_marker(s3, tmp_path, capsys):
    real_put = s3.client.put_object

    def another_finishes_first(**kwargs):
        if kwargs["Key"].endswith(".complete"):
            real_put(Bucket=BUCKET, Key=kwargs["Key"], Body=b'{"commit": "winner"}')
        return real_put(**kwargs)

    s3.client.put_object = another_finishes_first
    with LocalHub({"org/model": Repository(dict(FILES))}) as hub:
        assert run(s3, hub.url, tmp_path) == 0
    assert s3.client.get_object(Bucket=BUCKET, Key=PREFIX + ".complete")["Body"].read() == b'{"commit": "winner"}'
    assert "first; its set stands" in capsys.readouterr().out


def test_a_gated_model_needs_the_token_and_says_so(s3, tmp_path, capsys):
    with LocalHub({"org/model": Repository(dict(FILES), token="hf_secret")}) as hub:
        assert run(s3, hub.url, tmp_path) == 1
        assert "HTTP 401; the token cannot read it" in capsys.readouterr().err
        assert run(s3, hub.url, tmp_path, token="hf_secret") == 0
    assert PREFIX + ".complete" in keys(s3)


def test_the_token_never_follows_the_hubs_redirect_to_its_cdn(s3, tmp_path):
    """The hub redirects LFS downloads to another host; urllib would copy Authorization onto that
    request (the fake CDN refuses it, as presigned storage URLs may). huggingface_hub strips it on
    a redirect to another host, and so does modelstore/hub.py."""
    with LocalHub({"org/model": Repository(dict(FILES), token="hf_secret")}) as hub:
        assert run(s3, hub.url, tmp_path, token="hf_secret") == 0
    lfs = sorted(f"/org/model/{Repository(FILES).commit}/{f}" for f in FILES if f.endswith(".safetensors"))
    assert sorted(hub.cdn_requests) == lfs and hub.token_seen_by_cdn == []
    assert PREFIX + ".complete" in keys(s3)


@pytest.mark.parametrize("target, keeps", [("https://huggingface.co/api/other", True), ("https://cdn-lfs.hf.co/x", False),
                                           ("https://huggingface.co:8443/x", False), ("http://huggingface.co/x", False)])
def test_a_redirect_keeps_the_token_only_at_the_same_origin(target, keeps):
    import urllib.request

    from modelstore.hub import TokenStaysHome

    request = urllib.request.Request("https://huggingface.co/org/model/resolve/main/a", headers={"Authorization": "Bearer t"})
    follow = TokenStaysHome().redirect_request(request, None, 302, "Found", {}, target)
    assert follow.has_header("Authorization") is keeps


def test_the_token_is_read_from_the_file_the_pod_mounts(tmp_path):
    token = tmp_path / "token"
    token.write_text("hf_from_file\n")
    assert prepare.hub_token({"HF_TOKEN_PATH": str(token), "HF_TOKEN": "hf_from_env"}) == "hf_from_file"
    assert prepare.hub_token({"HF_TOKEN": "hf_from_env"}) == "hf_from_env"
    assert prepare.hub_token({}) is None
    token.write_text("")
    assert prepare.hub_token({"HF_TOKEN_PATH": str(token)}) is None
    with pytest.raises(OSError):  # a named file that is missing is a failed preparation, not an anonymous one
        prepare.hub_token({"HF_TOKEN_PATH": str(tmp_path / "missing")})


def test_a_pinned_revision_must_be_the_commit_the_hub_serves(s3, tmp_path, capsys):
    with LocalHub({"org/model": Repository(dict(FILES))}) as hub:
        assert run(s3, hub.url, tmp_path, revision="f" * 40) == 1
    assert "HTTP 404" in capsys.readouterr().err


# FP8: a checkpoint in Meta's layout, small.

def safetensors(tensors: dict[str, tuple[str, np.ndarray]]) -> bytes:
    header, data, offset = {}, b"", 0
    for name, (dtype, array) in tensors.items():
        raw = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    encoded = json.dumps({"__metadata__": {"format": "pt"}, **header}).encode()
    return struct.pack("<Q", len(encoded)) + encoded + data


def bf16(shape, value=0.5):
    return "BF16", np.full(shape, value, dtype=ml_dtypes.bfloat16)


WEIGHT = np.array([[448.0, -448.0, 1.0, 0.015625], [240.0, 0.0, -3.5, 2.0 ** -9]], dtype=ml_dtypes.float8_e4m3fn)
SCALE = np.array([[0.5], [2.0]], dtype=np.float32)
CHECKPOINT = {
    "model-00001-of-00001.safetensors": safetensors({
        "model.embed_tokens.weight": bf16((8, 4)),
        "model.layers.0.self_attn.q_proj.weight": bf16((4, 4)),
        "model.layers.0.mlp.down_proj.weight": bf16((4, 4)),
        "model.layers.1.self_attn.q_proj.weight": bf16((4, 4)),
        "model.layers.1.mlp.down_proj.weight": ("F8_E4M3", WEIGHT),
        "model.layers.1.mlp.down_proj.weight_scale": ("F32", SCALE),
        "lm_head.weight": bf16((8, 4)),
    }),
    "config.json": CONFIG,
}
BF16_MODULES = ["layers.0.mlp", "layers.0.self_attn", "layers.1.self_attn", "lm_head"]
FP8_PREFIX = "weights/org-model-fp8/main/neuron-fp8/"


def test_fp8_is_rescaled_for_neuron_with_its_modules_file(s3, tmp_path):
    with LocalHub({"org/model-fp8": Repository(dict(CHECKPOINT))}) as hub:
        assert run(s3, hub.url, tmp_path, "--bf16-modules", json.dumps(BF16_MODULES), model="org/model-fp8",
                   form="neuron-fp8", prefix=FP8_PREFIX) == 0
    body = s3.get_object(Bucket=BUCKET, Key=FP8_PREFIX + "files/model-00001-of-00001.safetensors")["Body"].read()
    original = CHECKPOINT["model-00001-of-00001.safetensors"]
    assert len(body) == len(original) and body[:8 + struct.unpack("<Q", body[:8])[0]] == original[:8 + struct.unpack("<Q", original[:8])[0]]
    header, start = json.loads(body[8:start_of(body)]), start_of(body)
    weight = np.frombuffer(tensor(body, start, header["model.layers.1.mlp.down_proj.weight"]), dtype=ml_dtypes.float8_e4m3fn)
    scale = np.frombuffer(tensor(body, start, header["model.layers.1.mlp.down_proj.weight_scale"]), dtype=np.float32)
    # 448 / (448 / 240) = 240 exactly; the scales grow by the same factor.
    assert weight.astype(np.float32).tolist()[:2] == [240.0, -240.0]
    assert scale.tolist() == pytest.approx([0.5 * 448 / 240, 2.0 * 448 / 240])
    # Unquantized tensors are byte for byte the same.
    assert tensor(body, start, header["lm_head.weight"]) == tensor(original, start, header["lm_head.weight"])
    modules = json.loads(s3.get_object(Bucket=BUCKET, Key=FP8_PREFIX + "files/modules_to_not_convert.json")["Body"].read())
    assert modules == {"model": {"modules_to_not_convert": BF16_MODULES}}


def start_of(body: bytes) -> int:
    return 8 + struct.unpack("<Q", body[:8])[0]


def tensor(body: bytes, start: int, info: dict) -> bytes:
    begin, end = info["data_offsets"]
    return body[start + begin:start + end]


def test_fp8_whose_bf16_modules_differ_from_the_programs_is_refused(s3, tmp_path, capsys):
    with LocalHub({"org/model-fp8": Repository(dict(CHECKPOINT))}) as hub:
        assert run(s3, hub.url, tmp_path, "--bf16-modules", json.dumps(["lm_head"]), model="org/model-fp8",
                   form="neuron-fp8", prefix=FP8_PREFIX) == 1
    assert FP8_PREFIX + ".complete" not in keys(s3)
    assert "only in the checkpoint ['layers.0.mlp', 'layers.0.self_attn', 'layers.1.self_attn']" in capsys.readouterr().err


def test_rescaling_arithmetic_matches_neurons_procedure():
    new_weight, new_scale = fp8.rescale_pair(WEIGHT, SCALE)
    factor = np.float32(448.0 / 240.0)
    # bf16(w / F) rounded to e4m3fn (F = 1.8667): 1/F = 0.5357 -> bf16 0.5352 -> 0.5625 (step 1/16);
    # 240/F = 128.6 -> 128 (step 16); 3.5/F = 1.875 exactly; 2^-6/F = 0.0084 -> 4 x 2^-9 (subnormal
    # steps of 2^-9); 2^-9/F = 0.00105, above half the smallest subnormal -> 2^-9.
    assert new_weight.astype(np.float32).tolist() == [[240.0, -240.0, 0.5625, 0.0078125], [128.0, 0.0, -1.875, 2.0 ** -9]]
    assert new_scale.tolist() == [[float(np.float32(0.5) * factor)], [float(np.float32(2.0) * factor)]]
    assert fp8.verify_pair("w", WEIGHT, SCALE, new_weight, new_scale) == 240.0


def test_a_wrong_factor_or_scale_layout_fails_verification():
    new_weight, _ = fp8.rescale_pair(WEIGHT, SCALE)
    with pytest.raises(fp8.RescaleError, match="moved beyond FP8 rounding"):
        fp8.verify_pair("w", WEIGHT, SCALE, new_weight, SCALE)  # scales not rescaled
    with pytest.raises(fp8.RescaleError, match="leave Neuron's FP8 range"):
        fp8.verify_pair("w", WEIGHT, SCALE, WEIGHT, SCALE)  # weights not rescaled: 448 > 240


def test_a_checkpoint_with_bf16_scales_is_refused(tmp_path):
    source = tmp_path / "in.safetensors"
    source.write_bytes(safetensors({"w.weight": ("F8_E4M3", WEIGHT), "w.weight_scale": ("BF16", SCALE.astype(ml_dtypes.bfloat16))}))
    with pytest.raises(fp8.RescaleError, match="expected F8_E4M3 weights with F32 scales, found F8_E4M3 and BF16"):
        fp8.rescale_file(source, tmp_path / "out.safetensors")


# Streaming: a model larger than the local disk bound, file by file.

class PeakDisk:
    """The largest number of bytes under a directory, sampled continuously by a thread and at every
    upload (when a file's local copies are all written and none deleted yet)."""

    def __init__(self, root):
        self.root, self.peak, self.samples = root, 0, 0
        self.running = False

    def sample(self) -> None:
        total = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file()) if self.root.exists() else 0
        self.peak, self.samples = max(self.peak, total), self.samples + 1

    def __enter__(self):
        import threading

        def watch():
            while self.running:
                with contextlib.suppress(FileNotFoundError):
                    self.sample()

        self.running, self.thread = True, threading.Thread(target=watch, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def big_shard(index: int, rows: int = 3000) -> bytes:
    """An FP8 shard in Meta's layout (~rows x 100 bytes): one quantized MLP and one BF16 attention."""
    weight = np.full((rows, 100), 1.5, dtype=ml_dtypes.float8_e4m3fn)
    return safetensors({f"model.layers.{index}.mlp.down_proj.weight": ("F8_E4M3", weight),
                        f"model.layers.{index}.mlp.down_proj.weight_scale": ("F32", np.full((rows, 1), 0.5, dtype=np.float32)),
                        f"model.layers.{index}.self_attn.q_proj.weight": bf16((8, 4))})


SHARDS = 6
STREAMED = {**{f"model-{i + 1:05d}-of-{SHARDS:05d}.safetensors": big_shard(i) for i in range(SHARDS)}, "config.json": CONFIG,
            "tokenizer.json": b'{"model": {}}'}
SHARD_BYTES = max(len(c) for c in STREAMED.values())


@pytest.mark.parametrize("form, copies", [("hub", 1), ("neuron-fp8", 2)])
def test_a_model_larger_than_the_disk_bound_streams_through_it(s3, tmp_path, form, copies):
    bound = 2 * copies * SHARD_BYTES  # two shards in flight, with three workers asking
    assert sum(len(c) for c in STREAMED.values()) > bound
    repo = Repository(dict(STREAMED), token="hf_secret")
    disk = PeakDisk(tmp_path / "work")
    real_upload = s3.client.upload_file

    def upload_sampling_first(path, bucket, key, **kwargs):
        disk.sample()
        return real_upload(path, bucket, key, **kwargs)

    s3.client.upload_file = upload_sampling_first
    modules = [f"layers.{i}.self_attn" for i in range(SHARDS)]
    prefix = f"weights/org-model/main/{form}/"
    with LocalHub({"org/model": repo}) as hub, disk:
        assert run(s3, hub.url, tmp_path, "--scratch-bytes", str(bound), "--bf16-modules", json.dumps(modules),
                   form=form, prefix=prefix, token="hf_secret") == 0
    assert len(hub.cdn_requests) == SHARDS and hub.token_seen_by_cdn == []
    assert SHARD_BYTES <= disk.peak <= bound and disk.samples > SHARDS
    assert s3.writes[-2:] == [prefix + "manifest.json", prefix + ".complete"]
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=prefix + "manifest.json")["Body"].read())
    expected = set(STREAMED) | ({"modules_to_not_convert.json"} if form == "neuron-fp8" else set())
    assert {f["path"] for f in manifest["files"]} == expected
    for entry in manifest["files"]:
        body = s3.get_object(Bucket=BUCKET, Key=prefix + "files/" + entry["path"])["Body"].read()
        assert (len(body), lfs_sha256(body)) == (entry["size"], entry["sha256"])
    assert not [p for p in (tmp_path / "work").rglob("*") if p.is_file()]  # every local copy deleted


def test_a_corrupt_file_in_a_streamed_model_leaves_no_manifest_no_marker_and_no_local_copy(s3, tmp_path, capsys):
    corrupt = f"model-00004-of-{SHARDS:05d}.safetensors"
    with LocalHub({"org/model": Repository(dict(STREAMED), corrupt=corrupt)}) as hub:
        assert run(s3, hub.url, tmp_path, "--scratch-bytes", str(2 * SHARD_BYTES)) == 1
    assert not {PREFIX + ".complete", PREFIX + "manifest.json"} & keys(s3)
    assert f"{corrupt} does not verify" in capsys.readouterr().err
    assert not [p for p in (tmp_path / "work").rglob("*") if p.is_file()]


def test_a_file_larger_than_the_bound_fails_before_anything_is_downloaded(s3, tmp_path, capsys):
    repo = Repository(dict(STREAMED))
    with LocalHub({"org/model": repo}) as hub:
        assert run(s3, hub.url, tmp_path, "--scratch-bytes", str(SHARD_BYTES - 1)) == 1
    assert [r for r in repo.requests if "/resolve/" in r] == [] and keys(s3) == set()
    assert f"{SHARD_BYTES / 1024:.1f} KiB of local disk, more than the preparation's bound" in capsys.readouterr().err
