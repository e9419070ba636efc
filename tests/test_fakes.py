"""Every fake the offline engine returns follows the documented format of the provider it stands
for: the quote each row cites is in the installed SDK or botocore, a cited example value matches
the row's pattern, and so does the fake. A fake that drifts from its source fails here."""
from __future__ import annotations

import gzip
import importlib
import json
import re
from pathlib import Path

import botocore
import pytest

from offline import fakes
from offline.engine import FakeAws

BOTOCORE_DATA = Path(botocore.__file__).parent / "data"
ROWS = [pytest.param(f, id=f"{f.token}:{f.output}") for f in fakes.FAKES]
SAMPLE = {"region": "us-east-2", "account": fakes.ACCOUNT_ID}


def normalized(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text or "")).strip()


def sdk_doc(ref: str) -> str:
    """The docstring of a dotted SDK attribute (a property's getter, a class or a function)."""
    module_name, *attributes = ref.split(".")
    target = importlib.import_module(module_name)
    for index, attribute in enumerate(attributes):
        try:
            target = getattr(target, attribute)
        except AttributeError:
            target = importlib.import_module(".".join([module_name, *attributes[:index + 1]]))
    return normalized((target.fget if isinstance(target, property) else target).__doc__)


def botocore_model(service: str, kind: str) -> dict:
    """The newest API version's document of a service (examples-1.json or service-2.json.gz)."""
    for version in sorted((BOTOCORE_DATA / service).iterdir(), reverse=True):
        path = version / kind
        if path.exists():
            return json.load(gzip.open(path) if path.suffix == ".gz" else path.open())
        if (version / f"{kind}.gz").exists():
            return json.load(gzip.open(version / f"{kind}.gz"))
    raise FileNotFoundError(f"botocore has no {kind} for {service}")


def botocore_example(ref: str):
    service, operation, path = ref.split(":")
    (example, *_) = botocore_model(service, "examples-1.json")["examples"][operation]
    value = example["output"]
    for part in path.split("."):
        value = value[int(part)] if part.isdigit() else value[part]
    return value


def botocore_doc(ref: str) -> str:
    service, path = ref.split(":")
    shape, member = path.split(".")
    return normalized(botocore_model(service, "service-2.json")["shapes"][shape]["members"][member]["documentation"])


def assert_valid_response(service: str, operation: str, response: dict) -> None:
    """The response fits the operation's output shape in the installed botocore, as Stubber checks
    what it is given (botocore.stub validates with ParamValidator)."""
    from botocore.session import get_session
    from botocore.validate import ParamValidator

    shape = get_session().get_service_model(service).operation_model(operation).output_shape
    report = ParamValidator().validate(response, shape)
    assert not report.has_errors(), report.generate_report()


def pattern(fake: fakes.Fake) -> str:
    return fake.pattern.replace("{region}", re.escape(SAMPLE["region"])).replace("{account}", SAMPLE["account"])


def sample_inputs(fake: fakes.Fake) -> dict:
    """Inputs the program sends for this resource or invoke (its own names and flags)."""
    return {
        fakes.BUCKET: {"bucketPrefix": "sd-qwen3-32b-qwen3-1-7b-a5-models-"},
        fakes.QUEUE: {"name": "sd-qwen3-32b-qwen3-1-7b-a5a34f"},
        fakes.EKS: {"name": "sd-platform", "createOidcProvider": True},
        fakes.LOG_GROUP: {"name": "/aws/vpc/sd-platform/flow-logs"},
        "aws:eks/getCluster:getCluster": {"name": "sd-platform"},
        "aws:eks/getAddonVersion:getAddonVersion": {"addonName": "vpc-cni", "kubernetesVersion": "1.35"},
        "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            {"filters": [{"name": "instance-type", "values": ["trn2.48xlarge"]}], "locationType": "availability-zone"},
    }.get(fake.token, {})


@pytest.mark.parametrize("fake", ROWS)
def test_each_source_says_what_the_row_quotes(fake):
    assert fake.sources
    for source in fake.sources:
        if source.kind == "sdk-doc":
            assert normalized(source.quote) in sdk_doc(source.ref), source
        elif source.kind == "botocore-doc":
            assert normalized(source.quote) in botocore_doc(source.ref), source
        elif source.kind == "botocore-example":
            example = botocore_example(source.ref)
            assert example == source.quote, source
        elif source.kind == "recorded-response":
            service, operation, filename = source.ref.split(":")
            document = fakes.recorded_response(filename)
            assert source.quote in document["about"], source
            assert_valid_response(service, operation, document["response"])
        else:
            package, path = source.ref.split(":")
            assert (Path(importlib.import_module(package).__file__).parent / path).exists(), source


@pytest.mark.parametrize("fake", ROWS)
def test_a_cited_example_fits_the_row_and_the_fake_fits_it_too(fake):
    for source in fake.sources:
        if source.kind == "botocore-example" and fake.token != fakes.EKS:
            assert re.fullmatch(fake.pattern.replace("{region}", "[a-z0-9-]+").replace("{account}", r"\d{12}"),
                                str(source.quote)), (fake.pattern, source.quote)
    value = fake.make(fakes.Context(region=SAMPLE["region"], token=fake.token, name="example", inputs=sample_inputs(fake)))
    for item in value if isinstance(value, list) else [value]:
        assert re.fullmatch(pattern(fake), str(item)), (fake.token, fake.output, item)
    assert value or value == [] or fake.output == "oidcProviderArn"


def test_the_oidc_outputs_relate_as_the_sources_say():
    """pulumi-eks: the issuer is the provider URL without `https://`; IAM (botocore
    CreateOpenIDConnectProvider example): the provider ARN ends with the URL without its scheme."""
    outputs = fakes.answer(fakes.EKS, "cluster-eks", {"name": "c", "createOidcProvider": True}, "us-east-2", preview=False)
    assert outputs["oidcProviderUrl"] == "https://" + outputs["oidcIssuer"]
    assert outputs["oidcProviderArn"].endswith(":oidc-provider/" + outputs["oidcIssuer"])
    example = botocore_example("iam:CreateOpenIDConnectProvider:OpenIDConnectProviderArn")
    assert example.endswith("oidc-provider/server.example.com")  # from Url "https://server.example.com"
    # No OIDC provider (Pod Identity): pulumi-eks documents an empty string.
    assert fakes.answer(fakes.EKS, "cluster-eks", {"name": "c"}, "us-east-2", preview=False)["oidcProviderArn"] == ""


def test_offered_zones_belong_to_the_region_asked_about():
    for region in ("us-east-2", "ap-south-2", "us-west-2"):
        zones = fakes.answer("aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings", "",
                             {"filters": [{"name": "instance-type", "values": ["trn2.48xlarge"]}]}, region, preview=False)["locations"]
        assert all(zone.startswith(region) for zone in zones)
        assert bool(zones) == (region != "us-west-2")


def test_preview_knows_autonames_and_invokes_but_no_create_time_value():
    cloud = FakeAws("us-east-2", preview=True)
    for fake in fakes.FAKES:
        if fake.token.startswith("aws:index/") or "/get" in fake.token:
            continue
        args = type("Args", (), {"typ": fake.token, "name": "example", "inputs": sample_inputs(fake)})()
        resource_id, outputs = cloud.new_resource(args)
        assert resource_id == ""
        top = fake.output.split(".")[0]
        assert (top in outputs) == (fake.at_preview or top in sample_inputs(fake)), fake.output


def test_the_addon_version_fake_answers_the_default_not_the_newest_as_the_provider_does():
    """pulumi-aws's get_addon_version without mostRecent returns the build marked default for the
    Kubernetes version; with it, the first listed (terraform-provider-aws addon_version_data_source.go
    findAddonVersionByTwoPartKey). The recorded response lists a newer non-default build first."""
    token = "aws:eks/getAddonVersion:getAddonVersion"
    ask = {"addonName": "vpc-cni", "kubernetesVersion": "1.35"}
    assert fakes.answer(token, "", ask, "us-east-2", preview=False)["version"] == "v1.21.1-eksbuild.1"
    assert fakes.answer(token, "", {**ask, "mostRecent": True}, "us-east-2", preview=False)["version"] == "v1.22.4-eksbuild.3"
    with pytest.raises(KeyError, match="no default coredns build"):
        fakes.answer(token, "", {**ask, "addonName": "coredns"}, "us-east-2", preview=False)


def test_an_invoke_without_a_fake_is_refused_not_answered_with_nothing():
    args = type("Args", (), {"token": "aws:ec2/getAmi:getAmi", "args": {}})()
    with pytest.raises(KeyError, match="no fake for invoke"):
        FakeAws("us-east-2").call(args)
