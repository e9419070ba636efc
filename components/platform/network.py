"""The VPC: public subnets for NAT, private subnets (tagged for Karpenter) for every node, in
availability zones where the trn2 instance type is offered."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from stackconfig import PlatformSpec
from stackconfig.zones import ZoneSelectionError, choose_zones, unoffered_zones


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


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
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

        def subnets(tier: str, cidrs: list, route: dict, tags: dict[str, str]) -> list[aws.ec2.Subnet]:
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
            return created

        # Every VPC comes with a default security group that admits traffic among its members and
        # allows all egress; nothing here uses it (EKS, its nodes and Karpenter's use the cluster's
        # own group). Managed with no rules, it admits nothing (CKV2_AWS_12). Pulumi adopts the group,
        # removing every rule, rather than creating it (pulumi-aws ec2.DefaultSecurityGroup docs); it
        # goes with the VPC.
        aws.ec2.DefaultSecurityGroup(f"{name}-default", vpc_id=vpc.id, ingress=[], egress=[],
                                     tags={"Name": f"{args.cluster_name}-default-unused"}, opts=child)
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={"Name": args.cluster_name}, opts=child)
        public_subnets = subnets("public", public_cidrs, {"gateway_id": gateway.id}, {"kubernetes.io/role/elb": "1"})
        # One NAT gateway: nodes only pull images and weights outbound, and an experiment
        # cluster does not need to survive the loss of an AZ at three times the NAT cost.
        nat_address = aws.ec2.Eip(f"{name}-nat", domain="vpc", tags={"Name": args.cluster_name}, opts=child)
        nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=nat_address.id, subnet_id=public_subnets[0].id,
                                 tags={"Name": args.cluster_name}, opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]))
        private_subnets = subnets("private", private_cidrs, {"nat_gateway_id": nat.id},
                                  {"kubernetes.io/role/internal-elb": "1", "karpenter.sh/discovery": args.cluster_name})

        self.zones = zones
        self.vpc_id = vpc.id
        self.private_subnet_ids = [s.id for s in private_subnets]
        self.public_subnet_ids = [s.id for s in public_subnets]
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids,
                               "publicSubnetIds": self.public_subnet_ids, "availabilityZones": zones})
