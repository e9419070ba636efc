"""The VPC: public subnets for NAT, private subnets (tagged for Karpenter) for every node, in
availability zones where the trn2 instance type is offered, and an S3 gateway endpoint on the private
route table, so the weights, compiled sets and image layers the nodes move stay off the NAT gateway."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from stackconfig import PlatformSpec
from stackconfig.zones import ZoneSelectionError, choose_zones, unoffered_zones

from ..iam import policy_document, render_policy


@dataclass(frozen=True)
class NetworkArgs:
    cluster_name: str
    """Used in the discovery and ELB tags the subnets carry."""
    cidr: str
    """A /16; private subnets get a /19 each (pods take VPC addresses), public ones a /24."""
    region: str
    instance_type: str
    """The accelerator instance type: the VPC spans zones that offer it."""
    availability_zone_count: int
    availability_zones: tuple[str, ...] = ()
    """Zones named in config (`cluster.availabilityZones`), e.g. a reservation's; empty: chosen
    by offering."""

    @classmethod
    def from_spec(cls, platform: PlatformSpec) -> "NetworkArgs":
        """The network a platform asks for; `make preflight` checks the same zones the program will use."""
        return cls(cluster_name=platform.cluster_name, cidr=platform.cluster.vpc_cidr, region=platform.region,
                   instance_type=platform.instance_type,
                   availability_zone_count=platform.cluster.availability_zone_count,
                   availability_zones=platform.cluster.availability_zones)


def offered_zones(instance_type: str, parent: pulumi.Resource) -> list[str]:
    """AZ names of the region that offer `instance_type`, from EC2 DescribeInstanceTypeOfferings
    (location type availability-zone). A plain invoke: it runs at preview too, so the subnets and
    their zones are known before anything is created."""
    offerings = aws.ec2.get_instance_type_offerings(
        filters=[{"name": "instance-type", "values": [instance_type]}],
        location_type="availability-zone",
        opts=pulumi.InvokeOptions(parent=parent),
    )
    return sorted(set(offerings.locations))


MODEL_STORE_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:AbortMultipartUpload", "s3:ListBucket")
"""Every action a role of the program holds on the model bucket (tests/test_network.py checks it)."""


def ecr_layer_bucket_arn(region: str) -> str:
    """Where private ECR serves image layers from: an AWS-owned bucket of the region. Every image
    the nodes pull from ECR in the region (the EKS add-ons') reads its layers from it, through the
    gateway endpoint once one exists, so the endpoint's policy must allow it or every such pull
    fails (Amazon ECR User Guide, "Amazon ECR interface VPC endpoints (AWS PrivateLink)", "Create
    the Amazon S3 gateway endpoint" and its minimum bucket permissions: s3:GetObject on
    arn:aws:s3:::prod-<region>-starport-layer-bucket/*)."""
    return f"arn:aws:s3:::prod-{region}-starport-layer-bucket"


def s3_endpoint_policy(region: str, bucket_arn: str) -> dict:
    """What may cross the VPC's S3 gateway endpoint: the model store (the actions the program's
    roles hold on it; the roles and the bucket policy narrow them further) and ECR's image layers. A request to any other bucket of the region is refused
    at the endpoint, whatever credentials it carries."""
    return policy_document([
        {"Sid": "ModelStore", "Effect": "Allow", "Principal": "*", "Action": list(MODEL_STORE_ACTIONS),
         "Resource": [bucket_arn, f"{bucket_arn}/*"]},
        {"Sid": "EcrImageLayers", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": f"{ecr_layer_bucket_arn(region)}/*"},
    ])


@dataclass(frozen=True)
class S3EndpointPolicyArgs:
    endpoint_id: pulumi.Input[str]
    region: str
    bucket_arn: pulumi.Input[str]
    """The model store's bucket, which exists only after the network: hence a policy of its own."""


class S3EndpointPolicy(pulumi.ComponentResource):
    """The S3 gateway endpoint's policy (s3_endpoint_policy), attached once the model bucket exists."""

    def __init__(self, name: str, args: S3EndpointPolicyArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:network:S3EndpointPolicy", name, None, opts)
        aws.ec2.VpcEndpointPolicy(name, vpc_endpoint_id=args.endpoint_id,
                                  policy=render_policy(pulumi.Output.from_input(args.bucket_arn).apply(
                                      lambda arn: s3_endpoint_policy(args.region, arn))),
                                  opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    s3_endpoint_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]
    public_subnet_ids: list[pulumi.Output[str]]
    zones: list[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:network:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        offered = offered_zones(args.instance_type, self)
        try:
            zones = choose_zones(offered, region=args.region, instance_type=args.instance_type,
                                 count=args.availability_zone_count, configured=args.availability_zones)
        except ZoneSelectionError as error:
            raise pulumi.RunError(str(error)) from None  # the engine prints it without a stack trace
        missing = unoffered_zones(offered, zones)
        if missing:
            pulumi.log.warn(f"cluster.availabilityZones {', '.join(missing)}: {args.instance_type} has no on-demand "
                            f"offering there; only a capacity reservation can launch it")
        block = ipaddress.ip_network(args.cidr)
        public_cidrs = list(block.subnets(new_prefix=24))[: len(zones)]
        private_cidrs = list(block.subnets(new_prefix=19))[1 : len(zones) + 1]

        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=args.cidr, enable_dns_hostnames=True, enable_dns_support=True,
                          tags={"Name": args.cluster_name}, opts=child)

        def subnets(tier: str, cidrs: list, route: dict, tags: dict[str, str]) -> tuple[aws.ec2.RouteTable, list[aws.ec2.Subnet]]:
            """One subnet per zone of a tier, all routed through one table whose default route is `route`."""
            table = aws.ec2.RouteTable(f"{name}-{tier}", vpc_id=vpc.id, routes=[{"cidr_block": "0.0.0.0/0", **route}],
                                       tags={"Name": f"{args.cluster_name}-{tier}"}, opts=child)
            created = []
            for index, (zone, cidr) in enumerate(zip(zones, cidrs)):
                subnet = aws.ec2.Subnet(f"{name}-{tier}-{index}", vpc_id=vpc.id, cidr_block=str(cidr),
                                        availability_zone=zone, map_public_ip_on_launch=False,
                                        tags={"Name": f"{args.cluster_name}-{tier}-{index}", **tags}, opts=child)
                aws.ec2.RouteTableAssociation(f"{name}-{tier}-{index}", subnet_id=subnet.id, route_table_id=table.id, opts=child)
                created.append(subnet)
            return table, created

        # Every VPC comes with a default security group that admits traffic among its members and
        # allows all egress; nothing here uses it (EKS, its nodes and Karpenter's use the cluster's
        # own group). Managed with no rules, it admits nothing (CKV2_AWS_12). Pulumi adopts the group,
        # removing every rule, rather than creating it (pulumi-aws ec2.DefaultSecurityGroup docs); it
        # goes with the VPC.
        aws.ec2.DefaultSecurityGroup(f"{name}-default", vpc_id=vpc.id, ingress=[], egress=[],
                                     tags={"Name": f"{args.cluster_name}-default-unused"}, opts=child)
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={"Name": args.cluster_name}, opts=child)
        _, public_subnets = subnets("public", public_cidrs, {"gateway_id": gateway.id}, {"kubernetes.io/role/elb": "1"})
        # One NAT gateway: nodes only pull images and weights outbound, and an experiment
        # cluster does not need to survive the loss of an AZ at three times the NAT cost.
        nat_address = aws.ec2.Eip(f"{name}-nat", domain="vpc", tags={"Name": args.cluster_name}, opts=child)
        nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=nat_address.id, subnet_id=public_subnets[0].id,
                                 tags={"Name": args.cluster_name}, opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]))
        private_table, private_subnets = subnets("private", private_cidrs, {"nat_gateway_id": nat.id},
                                                 {"kubernetes.io/role/internal-elb": "1", "karpenter.sh/discovery": args.cluster_name})
        # S3 in the region by the gateway endpoint's prefix-list route, which wins over the NAT's
        # default route (longest prefix); a gateway endpoint has no hourly or per-GB charge (Amazon
        # VPC User Guide, "Gateway endpoints"). Its policy: S3EndpointPolicy.
        endpoint = aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, service_name=f"com.amazonaws.{args.region}.s3",
                                       vpc_endpoint_type="Gateway", route_table_ids=[private_table.id],
                                       tags={"Name": f"{args.cluster_name}-s3"}, opts=child)

        self.zones = zones
        self.vpc_id = vpc.id
        self.s3_endpoint_id = endpoint.id
        self.private_subnet_ids = [s.id for s in private_subnets]
        self.public_subnet_ids = [s.id for s in public_subnets]
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids,
                               "publicSubnetIds": self.public_subnet_ids, "availabilityZones": zones,
                               "s3EndpointId": self.s3_endpoint_id})
