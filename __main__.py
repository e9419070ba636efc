"""Speculative decoding on Trainium2. A stack is a platform (`stackKind: platform`), a pairing on
a shared platform (`platform: org/project/stack`), or a standalone pairing that is its own
platform (the default); see stacks/ and docs/configuration.md, "Two ways to run a pairing"."""
from pathlib import Path

import pulumi

from components.handle import ClusterHandle
from components.pairing import build_pairing
from components.platform import aws_provider, build_platform, stack_tags
from components.runtime import hugging_face_token, stack_config
from stackconfig import HUGGING_FACE_TOKEN_KEY, ConfigError, PlatformSpec, parse_stack_config
from stackconfig.source import StackFiles

project, stack = pulumi.get_project(), pulumi.get_stack()
try:
    spec = parse_stack_config(project, stack, stack_config(), read_stack=StackFiles(Path(__file__).resolve().parent).config,
                              is_secret=pulumi.runtime.is_config_secret)
except ConfigError as error:
    raise pulumi.RunError(str(error)) from None  # the engine prints a RunError without a stack trace
tags = stack_tags(project, stack, spec.tags)
provider = aws_provider(spec.region, tags)

if isinstance(spec, PlatformSpec):
    cluster = build_platform(spec, tags, provider)
elif spec.shared:
    cluster = ClusterHandle.from_platform_stack(spec.platform_reference, spec.platform)
else:
    cluster = build_platform(spec.platform, tags, provider)

for name, value in cluster.outputs().items():
    pulumi.export(name, value)

if not isinstance(spec, PlatformSpec):
    pairing = build_pairing(spec, cluster, hugging_face_token(project, HUGGING_FACE_TOKEN_KEY), tags, provider)
    pulumi.export("platform", spec.platform_reference or stack)
    pulumi.export("workloadNamespace", pairing.namespace)
    pulumi.export("trn2Nodes", spec.node_count)
    pulumi.export("claimTemplates", {str(k): v for k, v in pairing.claim_templates.items()})
    pulumi.export("endpoints", pairing.endpoints)
    pulumi.export("artifactPrefixes", {
        v.name: pulumi.Output.concat("s3://", cluster.model_bucket, "/", v.artifact_path, "/") for v in spec.variants})
    pulumi.export("dashboardUrl", pairing.dashboard_url)
    pulumi.export("resultsPrefix", pairing.results_prefix)
    pulumi.export("benchmarkCronJob", pairing.benchmark_cron_job)
