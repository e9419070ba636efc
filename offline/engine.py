"""Run the real Pulumi program in-process against a recording engine: no cloud, no CLI.

Pulumi's mock runtime (pulumi.runtime.set_mocks) stands in for the engine. A
monitor subclass records every RegisterResource request exactly as the engine would receive it:
type, name, parent, dependencies and the serialized inputs, with secrets redacted. The fake cloud
answers from offline/fakes.py: deterministic computed values in each provider's documented
format, each row with its source (and checked against it by tests/test_fakes.py).

Both `make plan` (offline/plan.py) and the test suite go through `run_program`, so the tests
see the same resources the plan prints.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import pulumi
from google.protobuf import struct_pb2
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.settings import SETTINGS
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from . import fakes
from .collector import collector_paused

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"
SECRET_PLACEHOLDER = "[secret]"
UNKNOWN_PLACEHOLDER = "[unknown]"


@dataclass
class RecordedResource:
    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    dependencies: list[str]
    outputs: dict[str, Any] = field(default_factory=dict)
    provider: str | None = None
    """The provider reference ("<urn>::<id>") the engine would use for a custom resource."""
    aliases: list[dict[str, Any]] = field(default_factory=list)
    """As sent: {"urn": ...} or {"spec": {name, type, stack, project, parentUrn, noParent}}."""
    read: bool = False
    """A ReadResource (e.g. a StackReference), not a registration: nothing is created."""
    ignore_changes: list[str] = field(default_factory=list)
    """Input paths the engine leaves as they are on update (the ignoreChanges option)."""
    delete_before_replace: bool = False

    def as_plan_entry(self) -> dict[str, Any]:
        entry = {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "inputs": self.inputs,
            "dependencies": self.dependencies,
        }
        if self.aliases:
            entry["aliases"] = self.aliases
        if self.read:
            entry["read"] = True
        if self.ignore_changes:
            entry["ignoreChanges"] = self.ignore_changes
        return entry


@dataclass
class Recording:
    """Everything one run of the program registered, in registration order."""

    resources: list[RecordedResource]
    stack_outputs: dict[str, Any]
    """As a user sees them: secrets shown as "[secret]"."""
    raw_outputs: dict[str, Any] = field(default_factory=dict)
    """Unredacted, with `secret_output_names`: what a StackReference to this stack reads."""
    secret_output_names: list[str] = field(default_factory=list)
    stack: str = ""
    project: str = ""

    def urn_for(self, parent: str | None, type_: str, name: str) -> str:
        return engine_urn(self.stack, self.project, parent or "", type_, name)

    def alias_urns(self, resource: RecordedResource) -> set[str]:
        """Earlier URNs the engine would accept for `resource`: its own aliases (a URN, or a
        spec whose unset fields default to the resource's own), and the same under every alias
        of its parent, since a parent's aliases are inherited by its children (Pulumi docs,
        "aliases" resource option)."""
        by_urn = {r.urn: r for r in self.resources}
        parent = by_urn.get(resource.parent) if resource.parent else None
        parents = [resource.parent or ""] + sorted(self.alias_urns(parent) if parent else [])
        found: set[str] = set()
        identities = [(resource.type, resource.name)]
        for alias in resource.aliases:
            if "urn" in alias:
                found.add(alias["urn"])
                continue
            spec = alias["spec"]
            type_, name = spec.get("type") or resource.type, spec.get("name") or resource.name
            if spec.get("noParent"):
                found.add(self.urn_for("", type_, name))
            elif spec.get("parentUrn"):
                found.add(self.urn_for(spec["parentUrn"], type_, name))
            else:
                identities.append((type_, name))
        found |= {self.urn_for(p, t, n) for p in parents for t, n in identities}
        found.discard(resource.urn)
        return found

    def of_type(self, type_token: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type == type_token]

    def one(self, type_token: str, name: str | None = None) -> RecordedResource:
        matches = [r for r in self.of_type(type_token) if name is None or r.name == name]
        if len(matches) != 1:
            raise AssertionError(f"expected one {type_token} named {name!r}, found {[m.name for m in matches]}")
        return matches[0]

    def by_urn(self, urn: str) -> RecordedResource:
        return next(r for r in self.resources if r.urn == urn)

    def kubernetes_objects(self) -> list[RecordedResource]:
        """Resources that are Kubernetes objects sent to the API server (not Helm releases)."""
        return [
            r
            for r in self.resources
            if r.type.startswith("kubernetes:") and r.custom and "apiVersion" in r.inputs and "kind" in r.inputs
        ]

    def depends_on(self, resource: RecordedResource, other: RecordedResource) -> bool:
        """True when `resource` waits for `other`, directly or transitively, through dependency
        edges, resources passed as inputs (a reference resolves once the resource exists) or
        parents. Depending on a component means waiting for all its children.

        Pulumi deletes in reverse dependency order, so this also means "deleted before".
        """
        targets = self._descendants(other.urn)
        known = {r.urn: r for r in self.resources}
        seen: set[str] = set()
        pending = (list(known[resource.urn].dependencies) + _references(known[resource.urn].inputs)
                   + ([resource.parent] if resource.parent else []))
        while pending:
            urn = pending.pop()
            if urn in seen or urn not in known:
                continue
            if urn in targets:
                return True
            seen.add(urn)
            node = known[urn]
            pending.extend(node.dependencies)
            pending.extend(_references(node.inputs))
            if node.parent:
                pending.append(node.parent)
        return False

    def _descendants(self, urn: str) -> set[str]:
        found = {urn}
        changed = True
        while changed:
            changed = False
            for r in self.resources:
                if r.parent in found and r.urn not in found:
                    found.add(r.urn)
                    changed = True
        return found


def _references(value: Any) -> list[str]:
    """URNs of the resources passed as inputs ({"resourceUrn": ...}, as to_plain writes them)."""
    if isinstance(value, dict):
        if set(value) == {"resourceUrn"}:
            return [value["resourceUrn"]]
        return [urn for item in value.values() for urn in _references(item)]
    if isinstance(value, list):
        return [urn for item in value for urn in _references(item)]
    return []


def redacted(value: Any) -> Any:
    """Hide every value but keep the shape (a Secret's stringData keys stay visible)."""
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return SECRET_PLACEHOLDER


def to_plain(value: Any, redact: bool = True) -> Any:
    """A protobuf Value/Struct as the engine receives it, as JSON data.

    Secrets become "[secret]" when `redact`, resource references their URN.
    """
    if isinstance(value, struct_pb2.Struct):
        fields = dict(value.fields)
        sig = fields.get(rpc._special_sig_key)
        if sig is not None:
            kind = sig.string_value
            if kind == rpc._special_secret_sig:
                return redacted(to_plain(fields["value"], False)) if redact else to_plain(fields["value"], False)
            if kind == rpc._special_resource_sig:
                return {"resourceUrn": fields["urn"].string_value}
            if kind == rpc._special_output_value_sig:
                if redact and fields.get("secret") is not None and fields["secret"].bool_value:
                    return SECRET_PLACEHOLDER
                return to_plain(fields["value"], redact) if "value" in fields else UNKNOWN_PLACEHOLDER
            if kind == rpc._special_asset_sig or kind == rpc._special_archive_sig:
                return {k: to_plain(v, redact) for k, v in sorted(fields.items()) if k != rpc._special_sig_key}
        return {k: to_plain(v, redact) for k, v in sorted(fields.items())}
    if isinstance(value, struct_pb2.ListValue):
        return [to_plain(v, redact) for v in value.values]
    if isinstance(value, struct_pb2.Value):
        which = value.WhichOneof("kind")
        if which == "struct_value":
            return to_plain(value.struct_value, redact)
        if which == "list_value":
            return to_plain(value.list_value, redact)
        if which == "string_value":
            return UNKNOWN_PLACEHOLDER if value.string_value == rpc.UNKNOWN else value.string_value
        if which == "number_value":
            number = value.number_value
            return int(number) if number.is_integer() else number
        if which == "bool_value":
            return value.bool_value
        return None
    return value


def engine_urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    """A URN as the engine generates it: the parent's full qualified type, except that the root
    stack's type is left out (pulumi/pulumi pkg/resource/deploy/deployment.go,
    Deployment.generateURN: "Skip empty parents and don't use the root stack type; otherwise,
    use the full qualified type"). MockMonitor keeps only the parent's last type and keeps the
    stack's, so aliases the SDK computes (pulumi.create_urn) would never match its URNs."""
    qualified = parent.split("::")[2] if parent else ""
    prefix = f"{qualified}$" if qualified and qualified != ROOT_STACK_TYPE else ""
    return f"urn:pulumi:{stack}::{project}::{prefix}{type_}::{name}"


def _alias(alias) -> dict[str, Any]:
    """An Alias proto as plain data."""
    if alias.WhichOneof("alias") == "urn":
        return {"urn": alias.urn}
    spec = alias.spec
    fields = {"name": spec.name, "type": spec.type, "stack": spec.stack, "project": spec.project,
              "parentUrn": spec.parentUrn, "noParent": spec.noParent}
    return {"spec": {k: v for k, v in fields.items() if v}}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The mock engine, plus a faithful record of each registration request."""

    def __init__(self, mocks: pulumi_mocks.Mocks):
        super().__init__(mocks)
        self.recorded: list[RecordedResource] = []

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        return engine_urn(pulumi.get_stack(), pulumi.get_project(), parent, type_, name)

    def ReadResource(self, request):
        response = super().ReadResource(request)
        self.recorded.append(RecordedResource(
            urn=response.urn, type=request.type, name=request.name, parent=request.parent or None, custom=True,
            inputs=to_plain(request.properties), dependencies=sorted(set(request.dependencies)),
            outputs=self.resources[response.urn].state, provider=request.provider or None, read=True))
        return response

    def RegisterResource(self, request):
        # MockMonitor's own RegisterResource rehydrates resource references into Resource
        # objects on another event loop, which breaks components that take resources as
        # inputs (eks.ManagedNodeGroup(cluster=...)). The fake cloud only needs plain data.
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        _ensure_event_loop()
        resource_id, state = self.mocks.new_resource(
            pulumi.runtime.MockResourceArgs(
                typ=request.type,
                name=request.name,
                inputs=to_plain(request.object, redact=False),
                provider=request.provider,
                resource_id=request.importId,
                custom=request.custom or False,
            )
        )
        response_state = _sync_await(rpc.serialize_properties(state, {}))
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, resource_id, state)
        self.recorded.append(
            RecordedResource(
                urn=urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                custom=bool(request.custom),
                inputs=to_plain(request.object),
                dependencies=sorted(set(request.dependencies)),
                outputs=state,
                provider=request.provider or None,
                aliases=[_alias(a) for a in request.aliases],
                ignore_changes=list(request.ignoreChanges),
                delete_before_replace=bool(request.deleteBeforeReplace),
            )
        )
        return resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id, object=response_state)


def _fake_id(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


@dataclass(frozen=True)
class StackOutputs:
    """What a StackReference reads from another stack: its outputs and which are secret."""

    outputs: dict[str, Any]
    secret_output_names: list[str]


class FakeAws(pulumi.runtime.Mocks):
    """The cloud's answers: resources echo their inputs plus the computed outputs of
    offline/fakes.py (each in its provider's documented format); at preview, only what a preview
    knows, and no ids."""

    def __init__(self, region: str, references: dict[str, StackOutputs] | None = None, preview: bool = False):
        self.region = region
        self.references = references or {}
        self.preview = preview

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        token, name, inputs = args.typ, args.name, dict(args.inputs)
        if token == "pulumi:pulumi:StackReference":
            # The engine answers a StackReference read with the referenced stack's outputs and the
            # names of its secret ones (pulumi SDK StackReference: "outputs",
            # "secret_output_names"); an undeployed stack has none. Reads happen at preview too.
            referenced = self.references.get(inputs["name"], StackOutputs({}, []))
            return inputs["name"], {"name": inputs["name"], "outputs": referenced.outputs,
                                    "secretOutputNames": referenced.secret_output_names}
        outputs = {**inputs, **fakes.answer(token, name, inputs, self.region, self.preview)}
        # An id is only known once a resource exists: at preview the engine sends none (the SDK
        # treats "" as unknown, pulumi/runtime/resource.py).
        return ("" if self.preview else self._id(token, name, outputs)), outputs

    @staticmethod
    def _id(token: str, name: str, outputs: dict[str, Any]) -> str:
        if "id" in outputs:
            return outputs["id"]
        if token.startswith("kubernetes:"):
            # pulumi-kubernetes ids are "<namespace>/<name>" (just "<name>" when cluster-scoped).
            metadata = outputs.get("metadata") or {}
            return "/".join(p for p in (metadata.get("namespace"), metadata.get("name") or name) if p)
        return f"{name}-{_fake_id(token, name, length=8)}"

    def call(self, args: pulumi.runtime.MockCallArgs):
        if not fakes.fakes_for(args.token):
            raise KeyError(f"no fake for invoke {args.token}: add a row with its source to offline/fakes.py")
        return fakes.answer(args.token, "", dict(args.args), self.region, preview=False), []


def run_program(project: str, stack: str, config: dict[str, Any], secret_keys: list[str], program: Callable[[], None],
                references: dict[str, StackOutputs] | None = None, preview: bool = False) -> Recording:
    """Run `program` (the Pulumi program's entry function) under the recording engine, as
    `pulumi up` (or, with `preview`, as `pulumi preview`: computed outputs unknown).

    `config` maps "project:key" / "aws:region" to values as Pulumi passes them (strings;
    structured values JSON-encoded). `references` answers StackReference reads by stack name.
    """
    region = str(config.get("aws:region", ""))
    fake_cloud = FakeAws(region, references, preview)
    monitor = RecordingMonitor(fake_cloud)
    # set_mocks makes a root stack only where none is set, and the root outlives a run: without the
    # reset, every program after a process's first parents its resources to the first one's stack
    # (pulumi/runtime/mocks.py set_mocks; settings.py reset_options clears the root).
    pulumi.runtime.reset_options(project=project, stack=stack, preview=preview)
    pulumi.runtime.set_mocks(fake_cloud, project=project, stack=stack, preview=preview, monitor=monitor)
    pulumi.runtime.set_all_config(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}, secret_keys
    )
    SETTINGS.rpc_manager.clear()
    SETTINGS.outputs.clear()
    with collector_paused():
        _sync_await(run_pulumi_func(program))
    root = pulumi.runtime.get_root_resource()
    raw, secret = {}, []
    if root is not None and getattr(root, "outputs", None):
        raw, secret = _sync_await(_resolve_exports(root.outputs))
    shown = {k: SECRET_PLACEHOLDER if k in secret else v for k, v in raw.items()}
    return Recording(resources=list(monitor.recorded), stack_outputs=shown, raw_outputs=raw,
                     secret_output_names=secret, stack=stack, project=project)


async def _resolve_exports(outputs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    resolved, secret = {}, []
    for key, value in sorted(outputs.items()):
        output = pulumi.Output.from_input(value)
        if await output.is_secret():
            secret.append(key)
        # At preview an output that waits on a value computed at create is unknown, as
        # `pulumi preview` shows it (output<string>), not None.
        resolved[key] = await output.future() if await output.is_known() else UNKNOWN_PLACEHOLDER
    return resolved, secret
