"""Model store, model access and the vLLM servers of every stack."""
import json

from components.pairing.vllm_variant import workload_name
from offline.stacks import load_stack, run_stack
from stackconfig.server import local_copy

from .helpers import assert_least_privilege, role_documents, trust_condition
from .test_stacks import EXPECTED


def deployments(recording):
    """The vLLM servers' Deployments, by variant (a variant of several pods: server_deployments)."""
    return {d.inputs["metadata"]["labels"]["sd-trn2/variant"]: d for d in recording.of_type("kubernetes:apps/v1:Deployment")
            if "sd-trn2/server" not in d.inputs["metadata"]["labels"]}


def server_deployments(recording, spec):
    """Every server pod's Deployment, with its variant and which of the variant's servers it is."""
    by_name = {d.inputs["metadata"]["name"]: d for d in recording.of_type("kubernetes:apps/v1:Deployment")}
    return [(v, s, by_name[workload_name(v, s)]) for v in spec.variants for s in v.servers]


def vllm_variants(spec):
    return [v for v in spec.variants if len(v.servers) == 1]


def container(deployment):
    (only,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    return only


def flag(args, name):
    return args[args.index(name) + 1]


def test_one_deployment_and_service_per_server(recording, spec):
    """One per variant, two for a distributed one (its target and its draft)."""
    expected = sorted(workload_name(v, s) for v in spec.variants for s in v.servers)
    assert sorted(d.inputs["metadata"]["name"] for d in recording.of_type("kubernetes:apps/v1:Deployment")) == expected
    assert sorted(deployments(recording)) == sorted(v.name for v in vllm_variants(spec))
    services = recording.of_type("kubernetes:core/v1:Service")
    assert sorted(s.inputs["metadata"]["name"] for s in services) == expected
    for service in services:
        assert service.inputs["spec"]["type"] == "ClusterIP"


LEGACY_ONLY_ENV = {"VLLM_NEURON_FRAMEWORK", "VLLM_USE_V1", "NEURON_COMPILED_ARTIFACTS", "NEURON_RT_VIRTUAL_CORE_SIZE"}


def test_vllm_arguments_match_the_stack_table(recording, spec, stack):
    target, draft, _, tp, seqs, max_len, tokens, _, engine = EXPECTED[stack]
    assert spec.serving.target == target
    checked = 0
    for name, deployment in deployments(recording).items():
        variant = spec.variant(name)
        args = container(deployment)["args"]
        assert args[0] == "serve"
        assert (flag(args, "--tensor-parallel-size"), flag(args, "--max-num-seqs"), flag(args, "--max-model-len")) == (str(tp), str(seqs), str(max_len))
        assert flag(args, "--served-model-name") == variant.target
        speculative = json.loads(flag(args, "--speculative-config")) if variant.is_speculative else None
        # What vLLM loads is the prepared copy on the node, never a hub id.
        assert args[1] == local_copy(variant.prepared_target) and variant.prepared_target.model == variant.target
        if variant.is_speculative:
            # The table names the first SD configuration; a study's grid adds the others.
            first = variant == next(v for v in spec.variants if v.is_speculative)
            assert speculative["model"] == local_copy(variant.prepared_draft)
            assert variant.prepared_draft.model == (draft if first else variant.draft)
            assert speculative["num_speculative_tokens"] == (tokens if first else variant.num_speculative_tokens)
        else:
            assert "--speculative-config" not in args
        if engine == "nxdi-legacy":
            neuron = json.loads(flag(args, "--override-neuron-config"))
            assert neuron["save_sharded_checkpoint"] is True and "--additional-config" not in args
            if variant.is_speculative:
                assert speculative["max_model_len"] >= spec.benchmark.input_tokens + spec.benchmark.output_tokens
                assert neuron["enable_fused_speculation"] is True
            else:
                assert "enable_fused_speculation" not in neuron
        else:
            neuron = json.loads(flag(args, "--additional-config"))["neuron_config"]
            assert "--override-neuron-config" not in args and "--device" not in args
            batched = int(flag(args, "--max-num-batched-tokens"))
            assert neuron["num_seqs_buckets"][-1] == seqs and neuron["num_batched_tokens_buckets"][-1] == batched
            if variant.is_speculative:
                assert speculative["method"] == "eagle3" and "max_model_len" not in speculative
        checked += 1
    # The baseline and, where one is served by vLLM, an SD variant (a distributed study's are not).
    assert checked == len(vllm_variants(spec)) >= 1 + any(v.is_speculative for v in vllm_variants(spec))


def test_engine_environment_and_artifact_paths(recording, spec):
    paths = set()
    for name, deployment in deployments(recording).items():
        variant = spec.variant(name)
        env = {e["name"]: e.get("value") for e in container(deployment)["env"]}
        assert env["ARTIFACT_DIR"] == f"/var/mdl/{variant.artifact_path}"
        assert env["COMPILE_DIR"] == f"/node-cache/{variant.artifact_path}"
        if variant.engine == "nxdi-legacy":
            assert env["VLLM_NEURON_FRAMEWORK"] == "neuronx-distributed-inference"
            # Draft-model speculation exists only on the V0 path; the runtime's core size is the LNC.
            assert env["VLLM_USE_V1"] == "0"
            assert env["NEURON_RT_VIRTUAL_CORE_SIZE"] == str(variant.serving.logical_neuron_cores)
            # NxDI compiles into (and loads from) the directory serve.sh restores and publishes.
            assert env["NEURON_COMPILED_ARTIFACTS"] == env["COMPILE_DIR"]
        else:
            assert not LEGACY_ONLY_ENV & set(env), LEGACY_ONLY_ENV & set(env)
            # The plugin's NEFF cache ($VLLM_CACHE_ROOT/neuron/compile_cache) is what serve.sh publishes.
            assert env["VLLM_CACHE_ROOT"] == env["COMPILE_DIR"]
            assert env["NEURON_LOGICAL_NC_CONFIG"] == str(variant.serving.logical_neuron_cores)
            assert int(env["VLLM_NEURON_COMPILATION_TIMEOUT"]) >= 1200
        assert deployment.inputs["metadata"]["annotations"]["sd-trn2/artifacts"] == variant.artifact_path
        paths.add(env["ARTIFACT_DIR"])
    assert len(paths) == len(vllm_variants(spec))


def test_every_server_reads_prepared_weights_offline(recording, spec):
    for name, deployment in deployments(recording).items():
        variant = spec.variant(name)
        env = {e["name"]: e.get("value") for e in container(deployment)["env"]}
        assert env["WEIGHTS_STORE"] == f"/var/mdl/{variant.prepared_target.prefix.rstrip('/')}"
        assert container(deployment)["args"][1] == env["WEIGHTS_DIR"] == local_copy(variant.prepared_target)
        assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1"
        assert ("DRAFT_WEIGHTS_STORE" in env) == variant.is_speculative
        assert env["STAGING_DIR"] == f"/var/mdl/staging/{variant.artifact_path}"


def test_fp8_variants_read_the_weights_rescaled_for_neuron():
    recording = run_stack(load_stack("llama3.1-405b-llama3.2-1b"))
    sd = {e["name"]: e.get("value") for e in container(deployments(recording)["sd-fp8"])["env"]}
    base = {e["name"]: e.get("value") for e in container(deployments(recording)["base-bf16"])["env"]}
    assert sd["WEIGHTS_STORE"] == "/var/mdl/weights/llama-3-1-405b-instruct-fp8/main/neuron-fp8"
    assert sd["XLA_HANDLE_SPECIAL_SCALAR"] == sd["UNSAFE_FP8FNCAST"] == "1"
    assert base["WEIGHTS_STORE"] == "/var/mdl/weights/llama-3-1-405b-instruct/main/hub" and "UNSAFE_FP8FNCAST" not in base


def test_claims_tolerations_probes_and_shm(recording, spec):
    for name, deployment in deployments(recording).items():
        variant = spec.variant(name)
        pod = deployment.inputs["spec"]["template"]["spec"]
        (claim,) = pod["resourceClaims"]
        assert claim["resourceClaimTemplateName"] == f"neuron-{variant.devices}-device{'s' if variant.devices > 1 else ''}"
        assert container(deployment)["resources"]["claims"] == [{"name": claim["name"]}]
        assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        c = container(deployment)
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["httpGet"]["path"] == "/health"
        startup = c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"]
        assert startup >= (4.5 * 3600 if "32B" in variant.target or "405B" in variant.target else 3 * 3600)
        assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
        # A sequential study's servers start stopped and their count is the tuner's (benchmark/tuner.py).
        tuned = variant in spec.tuned_servers
        assert deployment.inputs["spec"]["strategy"] == {"type": "Recreate"} and deployment.inputs["spec"]["replicas"] == (0 if tuned else 1)
        assert deployment.ignore_changes == (["spec.replicas"] if tuned else [])
        assert deployment.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"


def test_variants_fit_the_nodes_they_share(recording, spec):
    """Packed as the NodePool packs them, the variants' requests on each node stay within what
    Karpenter expects the node to offer pods, less the DaemonSets' allowance."""
    from components.pairing.vllm_variant import (
        DAEMONSET_CPU_MILLICORES,
        DAEMONSET_MEMORY_MIB,
    )
    from stackconfig.catalog import INSTANCE_SHAPES
    from stackconfig.model import pack_device_groups, pack_variants

    shape = INSTANCE_SHAPES[spec.capacity.instance_type]
    per_device = []
    for _, server, deployment in server_deployments(recording, spec):
        requests = container(deployment)["resources"]["requests"]
        assert requests["memory"].endswith("Mi") and container(deployment)["resources"]["limits"]["memory"] == requests["memory"]
        (publisher,) = [c for c in deployment.inputs["spec"]["template"]["spec"]["initContainers"] if c["name"] == "publisher"]
        sidecar = publisher["resources"]["requests"]
        devices = server.devices
        # The pod's requests: the server's and its publisher's.
        per_device.append(((int(requests["cpu"]) * 1000 + int(sidecar["cpu"][:-1])) / devices,
                           (int(requests["memory"][:-2]) + int(sidecar["memory"][:-2])) / devices))
    # Any node of the packing holds at most neuron_devices devices, so a node fits if a device's share does.
    assert max(cpu for cpu, _ in per_device) * shape.neuron_devices <= shape.allocatable_cpu_millicores - DAEMONSET_CPU_MILLICORES
    assert max(mib for _, mib in per_device) * shape.neuron_devices <= shape.allocatable_memory_mib - DAEMONSET_MEMORY_MIB
    assert len(pack_variants(spec.variants, shape.neuron_devices)) == spec.parallel_node_count
    if all(len(v.servers) == 1 for v in spec.variants):
        assert len(pack_device_groups([v.devices for v in spec.variants], shape.neuron_devices)) == spec.parallel_node_count
    # Sequential: the nodes of the largest server, which the tuner never runs more than.
    largest = len(pack_device_groups([max(v.devices for v in spec.variants)], shape.neuron_devices))
    assert spec.node_count == (largest if spec.sequential else spec.parallel_node_count)


def test_model_bucket_is_private_encrypted_and_tls_only(recording):
    bucket = recording.one("aws:s3/bucket:Bucket", "model-store")
    assert bucket.inputs["forceDestroy"] is True
    block = recording.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "model-store").inputs
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    assert recording.one("aws:s3/bucketOwnershipControls:BucketOwnershipControls", "model-store").inputs["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    sse = recording.one("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", "model-store").inputs
    assert sse["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    statements = json.loads(recording.one("aws:s3/bucketPolicy:BucketPolicy", "model-store").inputs["policy"])["Statement"]
    (deny,) = [s for s in statements if s["Sid"] == "DenyNonTlsAccess"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    # The bucket itself (ListBucket) and every object (Get/Put): both must refuse plain HTTP.
    arn = bucket.outputs["arn"]
    assert deny["Resource"] == [arn, f"{arn}/*"] and deny["Action"] == "s3:*" and deny["Principal"] == "*"


def test_retained_model_store_is_not_force_destroyed():
    recording = run_stack(load_stack("qwen3-32b-qwen3-1.7b", {"sd-trn2:modelStore": {"retainOnDestroy": True}}))
    assert recording.one("aws:s3/bucket:Bucket", "model-store").inputs["forceDestroy"] is False


def test_csi_driver_role_reads_only_what_servers_mount(recording):
    """The driver's role reads the served roots and nothing else; tests/test_store_fence.py asks it
    request by request."""
    trust, policy = role_documents(recording, "model-store-csi")
    assert "system:serviceaccount:kube-system:s3-csi-driver-sa" in trust_condition(trust).values()
    assert assert_least_privilege(policy) == 2
    # The volumes are read-only: every write goes through the S3 API under the writer's own role.
    actions = sorted(a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    assert actions == ["s3:GetObject", "s3:ListBucket"]
    (addon,) = [a for a in recording.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-mountpoint-s3-csi-driver"]
    assert addon.inputs["addonVersion"].startswith("v")
    role = recording.one("aws:iam/role:Role", "model-store-csi")
    assert addon.inputs["serviceAccountRoleArn"] == role.outputs["arn"]


def test_mountpoint_gets_region_and_throughput_it_cannot_detect(recording, spec):
    """Mountpoint v2 pods cannot reach IMDS at the nodes' hop limit of 1, so without these
    options the region is guessed and throughput falls back to 10 Gbps (docs/facts.md, "Mountpoint for Amazon S3 CSI driver")."""
    node_class = recording.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "trn2-nodeclass").inputs["spec"]
    assert node_class["metadataOptions"]["httpPutResponseHopLimit"] == 1
    for volume in recording.of_type("kubernetes:core/v1:PersistentVolume"):
        options = volume.inputs["spec"]["mountOptions"]
        assert f"region {spec.region}" in options
        (throughput,) = [o for o in options if o.startswith("maximum-throughput-gbps ")]
        # trn2.48xlarge: network card 0, which carries pod traffic, is 200 Gbps (DescribeInstanceTypes).
        assert int(throughput.split()[1]) == {"trn2.48xlarge": 200, "trn2.3xlarge": 50}[spec.capacity.instance_type]


def test_one_read_only_volume_per_prefix_the_servers_read_each_bound_to_its_own_claim(recording, spec):
    bucket = recording.one("aws:s3/bucket:Bucket", "model-store").outputs["id"]
    volumes = {v.inputs["metadata"]["name"]: v.inputs["spec"] for v in recording.of_type("kubernetes:core/v1:PersistentVolume")}
    claims = {c.inputs["metadata"]["name"]: c.inputs for c in recording.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    prefixes = []
    for name, pv in volumes.items():
        assert pv["csi"]["driver"] == "s3.csi.aws.com" and pv["csi"]["volumeAttributes"]["bucketName"] == bucket
        assert pv["csi"]["volumeHandle"] == f"s3-{bucket}-{name}"
        assert not {"allow-delete", "allow-overwrite", "allow-other"} & set(pv["mountOptions"])
        # ReadOnlyMany: the driver mounts with --read-only; the servers mount it read-only too.
        assert pv["storageClassName"] == "" and pv["accessModes"] == ["ReadOnlyMany"]
        (prefix,) = [o.split(" ", 1)[1] for o in pv["mountOptions"] if o.startswith("prefix ")]
        prefixes.append(prefix)
        claim = claims[pv["claimRef"]["name"]]
        assert pv["claimRef"]["namespace"] == claim["metadata"]["namespace"] == spec.namespace
        assert claim["spec"]["volumeName"] == name and claim["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert sorted(prefixes) == sorted(m.prefix for m in spec.store_mounts)
    assert len(set(prefixes)) == len(prefixes) == len(claims)
    assert not [p for p in prefixes if p.startswith(("results/", "tokenizers/"))]


def test_each_server_mounts_only_its_own_prefixes_read_only_where_serve_sh_reads_them(recording, spec):
    """The paths serve.sh reads (the prepared models, the committed set, the staging sets) are each
    exactly one mount's path: nothing else of the bucket is visible to the server."""
    for variant, server, deployment in server_deployments(recording, spec):
        pod = deployment.inputs["spec"]["template"]["spec"]
        claims = {v["name"]: v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
        store = [m for m in container(deployment)["volumeMounts"] if m["name"] in claims]
        assert all(m["readOnly"] is True and claims[m["name"]]["readOnly"] is True for m in store)
        assert sorted(claims[m["name"]]["claimName"] for m in store) == sorted(m.claim_name for m in variant.server_store_mounts(server))
        env = {e["name"]: e["value"] for e in container(deployment)["env"]}
        read = [env[k] for k in ("ARTIFACT_DIR", "STAGING_DIR", "WEIGHTS_STORE", "DRAFT_WEIGHTS_STORE") if k in env]
        assert sorted(read) == sorted(m["mountPath"] for m in store)


def pod_templates(recording):
    for kind, template_of in {"kubernetes:apps/v1:Deployment": lambda spec: spec["template"],
                              "kubernetes:batch/v1:Job": lambda spec: spec["template"],
                              "kubernetes:batch/v1:CronJob": lambda spec: spec["jobTemplate"]["spec"]["template"]}.items():
        for workload in recording.of_type(kind):
            yield workload, template_of(workload.inputs["spec"])["spec"]


def test_token_is_a_file_only_where_something_downloads(recording, spec):
    """Only the pods that download a gated model get the token: its preparation Job, and the
    benchmark (LLMPerf's tokenizer); never the servers, which never reach the hub. They get it as a
    read-only file HF_TOKEN_PATH names, and no container anywhere reads a Secret into its environment."""
    secrets = recording.of_type("kubernetes:core/v1:Secret")
    gated = {m.job_name for m in spec.prepared_models if m.info.gated}
    holders = set()
    for workload, pod in pod_templates(recording):
        containers = pod["containers"] + pod.get("initContainers", [])
        assert not [e for c in containers for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})]
        assert not [e for c in containers for e in c.get("env", []) if e["name"] == "HF_TOKEN"]
        token_volumes = [v["name"] for v in pod["volumes"] if "secret" in v]
        if not token_volumes:
            assert not [e for c in containers for e in c.get("env", []) if e["name"] == "HF_TOKEN_PATH"]
            continue
        (volume,) = [v for v in pod["volumes"] if "secret" in v]
        assert volume["secret"]["secretName"] == secrets[0].inputs["metadata"]["name"]
        assert volume["secret"]["defaultMode"] == 0o440 and volume["secret"]["items"] == [{"key": "token", "path": "token"}]
        (container,) = pod["containers"]
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert mount["readOnly"] is True and env["HF_TOKEN_PATH"] == f"{mount['mountPath']}/token"
        holders.add(workload.inputs["metadata"].get("name", workload.name))
    if not spec.requires_hugging_face_token:
        assert secrets == [] and holders == set()
        return
    (secret,) = secrets
    assert secret.inputs["stringData"] == {"token": "[secret]"}
    benchmark = {w.inputs["metadata"]["name"] for w, _ in pod_templates(recording) if w.inputs["metadata"]["name"].startswith("llmperf")}
    assert holders == gated | benchmark and benchmark


def test_servers_are_deleted_before_capacity_and_storage(recording):
    pool = recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool")
    claims = recording.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    templates = recording.of_type("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate")
    for deployment in recording.of_type("kubernetes:apps/v1:Deployment"):
        assert pool.urn in deployment.dependencies and all(c.urn in deployment.dependencies for c in claims)
        assert all(t.urn in deployment.dependencies for t in templates)


def test_stack_outputs_per_variant(recording, spec):
    outputs = recording.stack_outputs
    for variant in spec.variants:
        server = workload_name(variant, variant.endpoint_server)
        assert outputs["endpoints"][variant.name] == f"http://{server}.{spec.namespace}.svc.cluster.local:8000/v1"
        assert outputs["artifactPrefixes"][variant.name] == f"s3://{outputs['modelBucket']}/{variant.artifact_path}/"


def test_the_model_bucket_logs_its_requests_to_a_hardened_bucket_only_s3_logging_writes(recording, spec):
    """CKV_AWS_18 (`make scan`): server access logs of the model bucket go to a log bucket of the
    program's own, which is private, encrypted and TLS-only, and which only S3's logging service may
    write to, for this bucket of this account (S3 user guide, "Enabling Amazon S3 server access logging")."""
    from components.platform.model_store import ACCESS_LOG_PREFIX

    from .iam_eval import allows

    models = recording.one("aws:s3/bucket:Bucket", "model-store")
    logs = recording.one("aws:s3/bucket:Bucket", "model-store-access-logs")
    logging = recording.one("aws:s3/bucketLogging:BucketLogging").inputs
    assert (logging["bucket"], logging["targetBucket"], logging["targetPrefix"]) == (
        models.outputs["id"], logs.outputs["id"], ACCESS_LOG_PREFIX)
    name = "model-store-access-logs"
    block = recording.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", name).inputs
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    assert recording.one("aws:s3/bucketOwnershipControls:BucketOwnershipControls", name).inputs["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    sse = recording.one("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", name).inputs
    assert sse["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    (expiry, _) = recording.one("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", name).inputs["rules"]
    assert expiry["expiration"]["days"] == spec.cluster.log_retention_days
    policy = json.loads(recording.one("aws:s3/bucketPolicy:BucketPolicy", name).inputs["policy"])
    logging_service = ("Service", "logging.s3.amazonaws.com")
    key = f"{logs.outputs['arn']}/{ACCESS_LOG_PREFIX}2026-11-27-00-00-00-ABCDEF"
    ours = {"aws:SourceArn": models.outputs["arn"], "aws:SourceAccount": "123456789012", "aws:SecureTransport": "true"}
    assert allows(policy, "s3:PutObject", key, ours, principal=logging_service)
    for other in ({**ours, "aws:SourceArn": "arn:aws:s3:::someone-elses-bucket"}, {**ours, "aws:SourceAccount": "210987654321"},
                  {**ours, "aws:SecureTransport": "false"}):
        assert not allows(policy, "s3:PutObject", key, other, principal=logging_service), other
    assert not allows(policy, "s3:PutObject", f"{logs.outputs['arn']}/elsewhere/x", ours, principal=logging_service)
    assert not allows(policy, "s3:PutObject", key, ours, principal=("AWS", "arn:aws:iam::123456789012:role/x"))
    # The delivery policy exists before logging is turned on.
    assert recording.depends_on(recording.one("aws:s3/bucketLogging:BucketLogging"),
                                recording.one("aws:s3/bucketPolicy:BucketPolicy", name))
