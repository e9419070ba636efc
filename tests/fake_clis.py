"""Stand-ins for the pulumi, kubectl and aws CLIs, written into a test's PATH (fake_bin fixture).

Each records its arguments as one JSON line in a log, so tests assert on what the tools ran.
What they print follows the real CLIs' documented formats:
- `pulumi stack output --json --show-secrets`: one JSON object, output name -> value, secrets in
  plain text (Pulumi CLI reference, pulumi_stack_output: "-j, --json  Emit output as JSON",
  "--show-secrets  Display outputs which are marked as secret in plaintext").
- the kubeconfig output: the JSON kubeconfig pulumi-eks generates, whose user runs
  `aws --region R eks get-token --cluster-name C --output json` (pulumi/pulumi-eks@7bf0c1b
  nodejs/eks/cluster/cluster.ts, generateKubeconfig).
"""
from __future__ import annotations

import json
from pathlib import Path

from offline.stacks import load_stack

STACK = "qwen3-32b-qwen3-1.7b"
SPEC = load_stack(STACK).spec()
CLUSTER = SPEC.cluster_name
NAMESPACE = SPEC.namespace
RESULTS = SPEC.results_prefix
# A marker in the kubeconfig: it is a secret output and must never reach the tools' output.
SECRET_MARKER = "LS0tLS1CRUdJTi1TRUNSRVQtQ0EtREFUQQ"


def kubeconfig(cluster: str = CLUSTER, region: str = "us-east-2") -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "aws",
        "clusters": [{"name": "kubernetes", "cluster": {"server": "https://EXAMPLE.gr7.us-east-2.eks.amazonaws.com",
                                                         "certificate-authority-data": SECRET_MARKER}}],
        "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
        "users": [{"name": "aws", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
            "args": ["--region", region, "eks", "get-token", "--cluster-name", cluster, "--output", "json"],
            "env": [{"name": "KUBERNETES_EXEC_INFO", "value": '{"apiVersion": "client.authentication.k8s.io/v1beta1"}'}]}}}],
    })


def deployed_outputs(region: str = "us-east-2", bucket: str = "sd-qwen3-32b-qwen3-1-7b-models-20261122") -> dict:
    """The outputs __main__.py exports, as `pulumi stack output --json --show-secrets` prints them."""
    return {"region": region, "clusterName": CLUSTER, "kubeconfig": kubeconfig(region=region),
            "workloadNamespace": NAMESPACE, "modelBucket": bucket, "benchmarkCronJob": "llmperf",
            "resultsPrefix": f"s3://{bucket}/{RESULTS}", "trn2Nodes": 1}


def pulumi(log: Path, outputs: dict | None = None, *, error: str | None = None, config: dict | None = None,
           destroy_exit: int = 0, stacks: dict[str, dict] | None = None) -> str:
    """A pulumi CLI: `stack output`, `config get`, `version`, `destroy`; `error` makes every
    command fail the way the CLI does (message on stderr, exit 255). `stacks` answers
    `stack output --stack S` per stack, and a stack it does not list does not exist."""
    return f"""
LOG, OUTPUTS, ERROR, CONFIG, DESTROY_EXIT = {str(log)!r}, {outputs or {}!r}, {error!r}, {config or {}!r}, {destroy_exit!r}
STACKS = {stacks!r}
args = sys.argv[1:]
with open(LOG, "a") as handle:
    handle.write(json.dumps(["pulumi", *args]) + "\\n")
if ERROR:
    sys.stderr.write(ERROR + "\\n")
    sys.exit(255)
if args[:2] == ["stack", "output"]:
    stack = args[args.index("--stack") + 1]
    if STACKS is not None and stack not in STACKS:
        sys.stderr.write("error: no stack named '" + stack + "' found\\n")
        sys.exit(255)
    print(json.dumps(OUTPUTS if STACKS is None else STACKS[stack]))
elif args[:2] == ["config", "get"]:
    if args[2] not in CONFIG:
        sys.stderr.write("error: configuration key '" + args[2] + "' not found for stack\\n")
        sys.exit(255)
    print(CONFIG[args[2]])
elif args[:1] == ["version"]:
    print("v3.272.0")
elif args[:1] == ["destroy"]:
    sys.exit(DESTROY_EXIT)
"""


def kubectl(log: Path, exit_code: int = 0, lease: dict | None = None) -> str:
    """A kubectl that records its arguments and, for --kubeconfig, the file's mode and content;
    `get lease` prints `lease` as JSON (nothing when None, as --ignore-not-found does)."""
    return f"""
LOG, EXIT, LEASE = {str(log)!r}, {exit_code!r}, {lease!r}
args = sys.argv[1:]
if "get" in args and "lease" in args and LEASE is not None:
    print(json.dumps(LEASE))
record = {{"argv": ["kubectl", *args]}}
if "--kubeconfig" in args:
    path = args[args.index("--kubeconfig") + 1]
    record["mode"] = oct(stat.S_IMODE(os.stat(path).st_mode))
    record["kubeconfig"] = open(path).read()
with open(LOG, "a") as handle:
    handle.write(json.dumps(record) + "\\n")
if args[:2] == ["version", "--client"]:
    print("Client Version: v1.34.2")
sys.exit(EXIT)
"""


AWS_CLI = """
print("aws-cli/2.31.0 Python/3.13.7 Linux/6.8.0 exe/x86_64")
"""


def logged(log: Path) -> list:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
