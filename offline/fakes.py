"""The fake cloud's answers, as data: one row per computed output the program reads, in the
provider's documented format, with the source it follows.

tests/test_fakes.py checks every row against the installed packages: a row's quote must appear
in the SDK docstring or botocore document it names, a botocore example value must match the
row's pattern, and the fake value must match it too. So a fake that drifts from its source fails
the suite, and the program's assumptions about real outputs are tested against the providers,
not against fakes written from the program's point of view.

Resources echo their inputs (providers return their inputs in the state, and a preview plans
them); rows add what a provider computes. A row marked `at_preview=False` is unknown during
`pulumi preview` (the provider only learns it when creating the resource); autonames are known
at preview because the engine assigns them when it checks the inputs.
"""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable, Literal

ACCOUNT_ID = "123456789012"
"""botocore sts GetCallerIdentity example: "Account": "123456789012"."""

SourceKind = Literal["sdk-doc", "botocore-example", "botocore-doc", "package-data", "recorded-response"]


@dataclass(frozen=True)
class Source:
    """Where a fake's format comes from.

    - sdk-doc: `ref` is a dotted attribute of an installed SDK ("pulumi_eks.Cluster.oidc_issuer");
      `quote` appears in its docstring.
    - botocore-example: `ref` is "service:Operation:path.to.value" in botocore's examples-1.json;
      `quote` is the example value there, and it must match the row's pattern.
    - botocore-doc: `ref` is "service:Shape.member"; `quote` appears in its documentation.
    - package-data: `ref` is a file of an installed package ("moto:ec2/resources/..."); it exists.
    - recorded-response: `ref` is "service:Operation:<file under offline/data>"; the file's
      "response" validates against the operation's output shape in botocore, and its "about"
      says where its values come from (`quote` appears there).
    """

    kind: SourceKind
    ref: str
    quote: str


@dataclass(frozen=True)
class Context:
    """What a fake value may depend on: the resource (or invoke) and the stack's account/region."""

    region: str
    token: str
    name: str
    inputs: dict[str, Any]
    account: str = ACCOUNT_ID

    def digest(self, *salt: str, length: int = 17) -> str:
        return hashlib.sha256("/".join((self.token, self.name, *salt)).encode()).hexdigest()[:length]

    def autoname(self) -> str:
        """The engine's default autoname: the logical name, a dash and 7 random hex characters
        (Pulumi docs, "Resource names: autonaming")."""
        return self.inputs.get("name") or f"{self.name}-{self.digest('autoname', length=7)}"


@dataclass(frozen=True)
class Fake:
    token: str
    """Resource type or invoke token."""
    output: str
    """Property name as the engine sends it (camelCase); dotted for a nested one."""
    pattern: str
    """Regular expression the value (each item of a list value) fully matches; {region} and
    {account} stand for the stack's."""
    sources: tuple[Source, ...]
    make: Callable[[Context], Any]
    at_preview: bool = False


def _ec2_id(prefix: str) -> Callable[[Context], str]:
    """EC2 ids: the prefix and 17 hex characters (botocore examples show both 8- and 17-digit ids)."""
    return lambda c: f"{prefix}-{c.digest()}"


def _ec2_id_fake(token: str, prefix: str, operation: str, path: str, example: str) -> Fake:
    return Fake(token, "id", rf"^{prefix}-([0-9a-f]{{8}}|[0-9a-f]{{17}})$",
                (Source("botocore-example", f"ec2:{operation}:{path}", example),), _ec2_id(prefix))


def _oidc_host(c: Context) -> str:
    return f"oidc.eks.{c.region}.amazonaws.com/id/{c.digest('oidc', length=32).upper()}"


def _kubeconfig(c: Context) -> str:
    """The shape pulumi-eks renders: a cluster with a server and CA, and an exec user that runs
    `aws eks get-token` (what `aws eks update-kubeconfig` writes too)."""
    cluster = c.inputs.get("name", c.name)
    server = f"https://{c.digest('endpoint', length=32).upper()}.gr7.{c.region}.eks.amazonaws.com"
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "aws",
        "clusters": [{"name": "kubernetes", "cluster": {"server": server, "certificate-authority-data": "LS0tLS1CRUdJTi=="}}],
        "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
        "users": [{"name": "aws", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                                                      "args": ["eks", "get-token", "--cluster-name", cluster, "--output", "json"]}}}],
    }, sort_keys=True)


@cache
def _offerings(region: str) -> list[dict[str, str]]:
    # The package's data files, found without importing moto (a third of a second per plan).
    (package_dir,) = importlib.util.find_spec("moto").submodule_search_locations
    path = Path(package_dir) / OFFERINGS_DATA / f"{region}.json.gz"
    return json.load(gzip.open(path)) if path.exists() else []


def _offered_locations(c: Context) -> list[str]:
    wanted = {v for f in c.inputs.get("filters", []) if f["name"] == "instance-type" for v in f["values"]}
    return [o["Location"] for o in _offerings(c.region) if o["InstanceType"] in wanted]


DATA_DIR = Path(__file__).parent / "data"


@cache
def recorded_response(filename: str) -> dict[str, Any]:
    return json.loads((DATA_DIR / filename).read_text())


def _addon_version(c: Context) -> str:
    """What eks.get_addon_version answers, from a recorded DescribeAddonVersions response: the
    first listed build compatible with the Kubernetes version whose compatibility is marked
    default, or with mostRecent the first listed (terraform-provider-aws
    internal/service/eks/addon_version_data_source.go findAddonVersionByTwoPartKey, which
    pulumi-aws wraps)."""
    version, name = c.inputs["kubernetesVersion"], c.inputs["addonName"]
    document = recorded_response(ADDON_VERSIONS_DATA.format(version=version))
    for addon in document["response"]["addons"]:
        if addon["addonName"] != name:
            continue
        for index, info in enumerate(addon["addonVersions"]):
            compatible = [x for x in info["compatibilities"] if x["clusterVersion"] == version]
            if c.inputs.get("mostRecent") and index == 0 or any(x.get("defaultVersion") for x in compatible):
                return info["addonVersion"]
    raise KeyError(f"{ADDON_VERSIONS_DATA.format(version=version)} has no default {name} build for {version}")


OFFERINGS_DATA = "ec2/resources/instance_type_offerings/availability-zone"
ADDON_VERSIONS_DATA = "eks-describe-addon-versions-{version}.json"
ROLE = "aws:iam/role:Role"
QUEUE = "aws:sqs/queue:Queue"
BUCKET = "aws:s3/bucket:Bucket"
RULE = "aws:cloudwatch/eventRule:EventRule"
EKS = "eks:index:Cluster"
KMS_KEY = "aws:kms/key:Key"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


def _key_id(c: Context) -> str:
    """A KMS key id: a UUID, as KMS generates it."""
    d = c.digest("key-id", length=32)
    return f"{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:]}"


FAKES: tuple[Fake, ...] = (
    # The network: ids as EC2 returns them.
    _ec2_id_fake("aws:ec2/vpc:Vpc", "vpc", "CreateVpc", "Vpc.VpcId", "vpc-a01106c2"),
    _ec2_id_fake("aws:ec2/subnet:Subnet", "subnet", "CreateSubnet", "Subnet.SubnetId", "subnet-9d4a7b6c"),
    _ec2_id_fake("aws:ec2/internetGateway:InternetGateway", "igw", "CreateInternetGateway",
                 "InternetGateway.InternetGatewayId", "igw-c0a643a9"),
    _ec2_id_fake("aws:ec2/eip:Eip", "eipalloc", "AllocateAddress", "AllocationId", "eipalloc-64d5890a"),
    _ec2_id_fake("aws:ec2/natGateway:NatGateway", "nat", "CreateNatGateway", "NatGateway.NatGatewayId", "nat-08d48af2a8e83edfd"),
    _ec2_id_fake("aws:ec2/routeTable:RouteTable", "rtb", "CreateRouteTable", "RouteTable.RouteTableId", "rtb-22574640"),
    # botocore has no CreateVpcEndpoint example; the vpce- prefix is the one pulumi_aws's import
    # example for aws:ec2/vpcEndpoint:VpcEndpoint spells (vpce-3ecf2a57).
    Fake("aws:ec2/vpcEndpoint:VpcEndpoint", "id", r"^vpce-([0-9a-f]{8}|[0-9a-f]{17})$",
         (Source("botocore-doc", "ec2:VpcEndpoint.VpcEndpointId", "The ID of the endpoint."),), _ec2_id("vpce")),
    # The system nodes' launch template: EC2 numbers its versions from 1.
    _ec2_id_fake(LAUNCH_TEMPLATE, "lt", "CreateLaunchTemplate", "LaunchTemplate.LaunchTemplateId", "lt-01238c059e3466abc"),
    Fake(LAUNCH_TEMPLATE, "latestVersion", r"^[1-9]\d*$",
         (Source("botocore-example", "ec2:CreateLaunchTemplate:LaunchTemplate.LatestVersionNumber", 1),
          Source("sdk-doc", "pulumi_aws.ec2.LaunchTemplate.latest_version", "The latest version of the launch template.")),
         lambda c: 1),
    # IAM roles are autonamed; their ARN is known once created.
    Fake(ROLE, "name", r"^[\w+=,.@-]{1,64}$",
         (Source("sdk-doc", "pulumi_aws.iam.Role.name", "If omitted, the provider will assign a random, unique name."),),
         Context.autoname, at_preview=True),
    Fake(ROLE, "id", r"^[\w+=,.@-]{1,64}$",
         (Source("sdk-doc", "pulumi_aws.iam.Role.name", "Friendly name of the role."),), Context.autoname, at_preview=True),
    Fake(ROLE, "arn", r"^arn:aws:iam::{account}:role/[\w+=,.@-]{1,64}$",
         (Source("botocore-example", "iam:CreateRole:Role.Arn", "arn:aws:iam::123456789012:role/Test-Role"),
          Source("sdk-doc", "pulumi_aws.iam.Role.arn", "ARN specifying the role.")),
         lambda c: f"arn:aws:iam::{c.account}:role/{c.autoname()}"),
    # The interruption queue: named; its id is its URL.
    Fake(QUEUE, "url", r"^https://sqs\.{region}\.amazonaws\.com/{account}/[\w-]{1,80}$",
         (Source("sdk-doc", "pulumi_aws.sqs.Queue.url", "Same as `id`: The URL for the created Amazon SQS queue."),
          Source("botocore-doc", "sqs:CreateQueueResult.QueueUrl", "The URL of the created Amazon SQS queue.")),
         lambda c: f"https://sqs.{c.region}.amazonaws.com/{c.account}/{c.autoname()}"),
    Fake(QUEUE, "id", r"^https://sqs\.{region}\.amazonaws\.com/{account}/[\w-]{1,80}$",
         (Source("sdk-doc", "pulumi_aws.sqs.Queue.url", "Same as `id`"),),
         lambda c: f"https://sqs.{c.region}.amazonaws.com/{c.account}/{c.autoname()}"),
    Fake(QUEUE, "arn", r"^arn:aws:sqs:{region}:{account}:[\w-]{1,80}$",
         (Source("sdk-doc", "pulumi_aws.sqs.Queue.arn", "ARN of the SQS queue."),),
         lambda c: f"arn:aws:sqs:{c.region}:{c.account}:{c.autoname()}"),
    # The model bucket: a prefix plus a unique suffix (63 - 37 = 26 characters) chosen at create.
    Fake(BUCKET, "bucket", r"^[a-z0-9][a-z0-9.-]{2,62}$",
         (Source("sdk-doc", "pulumi_aws.s3.Bucket.bucket_prefix", "Creates a unique bucket name beginning with the specified prefix."),
          Source("sdk-doc", "pulumi_aws.s3.Bucket.bucket", "less than or equal to 63 characters in length")),
         lambda c: c.inputs.get("bucket") or c.inputs["bucketPrefix"] + c.digest("bucket", length=26)),
    Fake(BUCKET, "id", r"^[a-z0-9][a-z0-9.-]{2,62}$",
         (Source("sdk-doc", "pulumi_aws.s3.Bucket.bucket", "Name of the bucket."),),
         lambda c: c.inputs.get("bucket") or c.inputs["bucketPrefix"] + c.digest("bucket", length=26)),
    Fake(BUCKET, "arn", r"^arn:aws:s3:::[a-z0-9][a-z0-9.-]{2,62}$",
         (Source("sdk-doc", "pulumi_aws.s3.Bucket.arn", "Will be of format `arn:aws:s3:::bucketname`."),),
         lambda c: "arn:aws:s3:::" + (c.inputs.get("bucket") or c.inputs["bucketPrefix"] + c.digest("bucket", length=26))),
    # The cluster's Secrets key: KMS picks its id (a UUID); the ARN carries it.
    Fake(KMS_KEY, "keyId", r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
         (Source("botocore-example", "kms:CreateKey:KeyMetadata.KeyId", "1234abcd-12ab-34cd-56ef-1234567890ab"),),
         _key_id),
    Fake(KMS_KEY, "id", r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
         (Source("sdk-doc", "pulumi_aws.kms.Key.key_id", "Globally unique identifier for the key."),),
         _key_id),
    Fake(KMS_KEY, "arn", r"^arn:aws:kms:{region}:{account}:key/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
         (Source("botocore-example", "kms:CreateKey:KeyMetadata.Arn",
                 "arn:aws:kms:us-east-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"),),
         lambda c: f"arn:aws:kms:{c.region}:{c.account}:key/{_key_id(c)}"),
    # Log groups are named by the program; the ARN names the group, without the API's `:*`.
    Fake(LOG_GROUP, "arn", r"^arn:aws:logs:{region}:{account}:log-group:[\w#./-]{1,512}$",
         (Source("sdk-doc", "pulumi_aws.cloudwatch.LogGroup.arn", "ARN specifying the log group. Any `:*` suffix added by "
                 "the API, denoting all CloudWatch Log Streams under the CloudWatch Log Group, is removed"),),
         lambda c: f"arn:aws:logs:{c.region}:{c.account}:log-group:{c.inputs.get('name') or c.autoname()}"),
    # EventBridge rules feeding the queue: autonamed.
    Fake(RULE, "name", r"^[\w.-]{1,64}$",
         (Source("sdk-doc", "pulumi_aws.cloudwatch.EventRule.name", "If omitted, this provider will assign a random, unique name."),),
         Context.autoname, at_preview=True),
    Fake(RULE, "arn", r"^arn:aws:events:{region}:{account}:rule/[\w.-]{1,64}$",
         (Source("sdk-doc", "pulumi_aws.cloudwatch.EventRule.arn", "ARN of the rule."),),
         lambda c: f"arn:aws:events:{c.region}:{c.account}:rule/{c.autoname()}"),
    # pulumi-eks: the issuer with and without its scheme, the IAM OIDC provider built from it.
    Fake(EKS, "oidcProviderUrl", r"^https://oidc\.eks\.{region}\.amazonaws\.com/id/[0-9A-F]{32}$",
         (Source("sdk-doc", "pulumi_eks.Cluster.oidc_provider_url", "Issuer URL for the OpenID Connect identity provider"),
          Source("botocore-doc", "eks:OIDC.issuer", "The issuer URL for the OIDC identity provider.")),
         lambda c: f"https://{_oidc_host(c)}"),
    Fake(EKS, "oidcIssuer", r"^oidc\.eks\.{region}\.amazonaws\.com/id/[0-9A-F]{32}$",
         (Source("sdk-doc", "pulumi_eks.Cluster.oidc_issuer", "OIDC Provider URL without leading `https://`"),),
         _oidc_host),
    Fake(EKS, "oidcProviderArn", r"^(arn:aws:iam::{account}:oidc-provider/oidc\.eks\.{region}\.amazonaws\.com/id/[0-9A-F]{32})?$",
         (Source("botocore-example", "iam:CreateOpenIDConnectProvider:OpenIDConnectProviderArn",
                 "arn:aws:iam::123456789012:oidc-provider/server.example.com"),
          Source("sdk-doc", "pulumi_eks.Cluster.oidc_provider_arn", "Defaults to an empty string if no OIDC provider is configured.")),
         lambda c: f"arn:aws:iam::{c.account}:oidc-provider/{_oidc_host(c)}" if c.inputs.get("createOidcProvider") else ""),
    Fake(EKS, "kubeconfigJson", r'^\{.*"kind": "Config".*\}$',
         (Source("sdk-doc", "pulumi_eks.Cluster.kubeconfig_json", "A kubeconfig that can be used to connect to the EKS cluster as a JSON string."),),
         _kubeconfig),
    # Invokes run at preview too: their answers are always known.
    Fake("aws:index/getCallerIdentity:getCallerIdentity", "accountId", r"^\d{12}$",
         (Source("botocore-example", "sts:GetCallerIdentity:Account", "123456789012"),
          Source("sdk-doc", "pulumi_aws.GetCallerIdentityResult.account_id", "AWS Account ID number")),
         lambda c: c.account, at_preview=True),
    Fake("aws:index/getPartition:getPartition", "partition", r"^aws$",
         (Source("sdk-doc", "pulumi_aws.GetPartitionResult.partition", "`aws` in AWS Commercial"),),
         lambda c: "aws", at_preview=True),
    Fake("aws:index/getPartition:getPartition", "dnsSuffix", r"^amazonaws\.com$",
         (Source("sdk-doc", "pulumi_aws.GetPartitionResult.dns_suffix", "`amazonaws.com` in AWS Commercial"),),
         lambda c: "amazonaws.com", at_preview=True),
    Fake("aws:eks/getCluster:getCluster", "vpcConfig.clusterSecurityGroupId", r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$",
         (Source("botocore-example", "eks:DescribeCluster:cluster.resourcesVpcConfig.securityGroupIds.0", "sg-6979fe18"),
          Source("botocore-doc", "eks:VpcConfigResponse.clusterSecurityGroupId", "The cluster security group that was created by Amazon EKS")),
         lambda c: f"sg-{c.digest('cluster-sg')}", at_preview=True),
    Fake("aws:eks/getCluster:getCluster", "name", r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$",
         (Source("botocore-example", "eks:DescribeCluster:cluster.name", "devel"),),
         lambda c: c.inputs["name"], at_preview=True),
    Fake("aws:eks/getAddonVersion:getAddonVersion", "version", r"^v\d+\.\d+\.\d+-eksbuild\.\d+$",
         (Source("recorded-response", "eks:DescribeAddonVersions:" + ADDON_VERSIONS_DATA.format(version="1.35"),
                 "Not a capture from an AWS account"),
          Source("recorded-response", "eks:DescribeAddonVersions:" + ADDON_VERSIONS_DATA.format(version="1.36"),
                 "Not a capture from an AWS account"),
          Source("sdk-doc", "pulumi_aws.eks.GetAddonVersionResult.version", "Version of the EKS add-on."),
          Source("botocore-doc", "eks:Compatibility.defaultVersion", "The supported default version.")),
         _addon_version, at_preview=True),
    Fake("aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings", "locations", r"^{region}[a-z]$",
         (Source("package-data", f"moto:{OFFERINGS_DATA}/us-east-2.json.gz", "moto's snapshot of EC2 DescribeInstanceTypeOfferings"),
          Source("sdk-doc", "pulumi_aws.ec2.GetInstanceTypeOfferingsResult.locations", "List of locations.")),
         _offered_locations, at_preview=True),
)


def fakes_for(token: str) -> list[Fake]:
    return [f for f in FAKES if f.token == token]


def set_path(target: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value


def answer(token: str, name: str, inputs: dict[str, Any], region: str, preview: bool) -> dict[str, Any]:
    """The computed outputs a resource (or an invoke) gets back, on top of its echoed inputs."""
    context = Context(region=region, token=token, name=name, inputs=inputs)
    outputs: dict[str, Any] = {}
    for fake in fakes_for(token):
        if preview and not fake.at_preview:
            continue
        value = fake.make(context)
        set_path(outputs, fake.output, value)
    return outputs
