"""Pods as local processes, the way kubelet and the Job and Deployment controllers run them.

- Volumes become local folders under the pod's own folder: an emptyDir is a fresh folder, created
  with the pod and gone with it, its `sizeLimit` enforced as kubelet's eviction manager does (the
  pod is evicted, phase Failed, reason Evicted, kubelet's own message); a ConfigMap, Secret or
  projected volume is written out with its items; a Mountpoint claim is the store view of its
  prefix (rehearse/store.py), shared and read-only.
- A container's command, args and env are the rendered ones, with every mount path rewritten to
  its local folder (a process here has no mount namespace of its own), the pod's ports mapped to
  free local ports (pods here share one loopback), each Service address (cluster DNS) to the
  local port of the pod behind it, and `$(VAR)` expanded as Kubernetes does. What the node adds
  (the stand-in commands on PATH, the store's and hub's local addresses) comes from the Node.
- Init containers run in their order: a native sidecar (restartPolicy Always) is started, any other
  runs to completion (a failed one restarted with back-off); sidecars stop after the pod's
  containers; a container of a Deployment's pod that exits is restarted with kubelet's
  back-off (10 s doubling, at most 300 s); a Job's pod that fails is replaced until the Job's
  backoffLimit; a Deployment's pod that is evicted or deleted is replaced while it has replicas.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from modelstore.layout import LOCAL_COMPLETE, LOCAL_RESTORED

from .kube import Cluster, Workload
from .kubeapi import SERVICE_ACCOUNT_MOUNT, service_account_token
from .processes import Supervisor, Timeline

BACKOFF_INITIAL_S, BACKOFF_MAX_S = 10.0, 300.0
"""kubelet's container restart back-off (Kubernetes docs, "Pod Lifecycle": container restarts)."""
EMPTYDIR_EVICTION = 'Usage of EmptyDir volume "{volume}" exceeds the limit "{limit}". '
"""kubelet's eviction message for an emptyDir over its sizeLimit (kubernetes pkg/kubelet/eviction/
helpers.go, emptyDirMessageFmt)."""
QUANTITY = re.compile(r"^(?P<number>\d+(\.\d+)?)(?P<unit>Ki|Mi|Gi|Ti|k|M|G|T)?$")
UNITS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
ENV_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
PORT_FLAG = re.compile(r"^--([a-z]+-)*port$")
ALL_INTERFACES, LOOPBACK = "0.0.0.0", "127.0.0.1"


def quantity_bytes(text: str) -> int:
    """A Kubernetes quantity of bytes ("2Gi", "500M")."""
    match = QUANTITY.match(str(text))
    if not match:
        raise ValueError(f"not a quantity of bytes: {text!r}")
    return int(float(match["number"]) * UNITS[match["unit"]])


MARKERS = (LOCAL_COMPLETE, LOCAL_RESTORED)
"""serve.sh's markers in the node cache (a complete copy, a set restored from the store): each put
on the timeline when it appears."""


def folder_bytes(path: Path, markers: set[str] | None = None) -> int:
    """What a folder's files take (their sizes; kubelet counts the disk blocks, du -s); the
    relative paths of the markers found are added to `markers`."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue  # removed while counting
            if markers is not None and name in MARKERS:
                markers.add(os.path.relpath(os.path.join(root, name), path))
    return total


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Localizer:
    """Rewrites a container's strings for this machine: every mount path (the longest first, as a
    whole path component) to its local folder, the pod's ports to their local ones, and each
    Service address (cluster DNS host:port) to its local one."""

    def __init__(self, mounts: dict[str, Path], ports: dict[int, int], services: dict[str, str] | None = None):
        self.mounts, self.ports = {k.rstrip("/") or "/": v for k, v in mounts.items()}, ports
        self.services = services or {}
        paths = sorted(self.mounts, key=len, reverse=True)
        self.pattern = re.compile(r"(?<![\w.\-/])(" + "|".join(re.escape(p) for p in paths) + r")(?=/|$|[^\w.\-])") \
            if paths else None

    def path(self, text: str) -> str:
        if self.pattern is None:
            return text
        return self.pattern.sub(lambda m: str(self.mounts[m.group(1)]), text)

    def __call__(self, text: str) -> str:
        text = self.path(text)
        for address, local in self.services.items():
            text = text.replace(address, local)
        for port, local in self.ports.items():
            text = re.sub(rf"\b(127\.0\.0\.1|localhost):{port}\b", rf"127.0.0.1:{local}", text)
        return text

    def port_token(self, text: str) -> str:
        """A token that is one of the pod's ports ("8000" after --port, VLLM_PORT=8000)."""
        return str(self.ports[int(text)]) if text.isdigit() and int(text) in self.ports else text

    def argv(self, argv: list[str]) -> list[str]:
        """Each argument rewritten; the value of a port flag (--port, --health-port) that is one of
        the pod's ports becomes its local port; a server's `--host 0.0.0.0` (every interface of the
        pod's own network namespace) becomes the loopback, the one interface pods share here."""
        out: list[str] = []
        for i, arg in enumerate(argv):
            flag = argv[i - 1] if i else ""
            if PORT_FLAG.match(flag):
                out.append(self.port_token(arg))
            elif flag == "--host" and arg == ALL_INTERFACES:
                out.append(LOOPBACK)
            else:
                out.append(self(arg))
        return out


@dataclass
class Node:
    """What this machine gives every pod: the stand-ins' commands first on PATH, and the local
    addresses of what the cluster reaches over the network (S3, CloudWatch, the hub)."""

    bin_dir: Path
    environment: dict[str, str]
    """Added to every container's environment (the AWS endpoint and test credentials, HF_ENDPOINT)."""
    services: dict[str, str] = field(default_factory=dict)
    """A Service's cluster DNS address -> its local one: "vllm-base.<ns>.svc.cluster.local:8000" -> "127.0.0.1:P"."""
    store_views: dict[str, Path] = field(default_factory=dict)
    """A claim's name -> its store view's folder."""
    container_environment: Callable[[str, str], dict[str, str]] = lambda pod, container: {}
    """Extra environment for one container (the faults' switches)."""


MOUNT_NAMESPACE_SCRIPT = """set -e
run=$(readlink -f "$(dirname "$(dirname "$(dirname "$2")")")")
mount -t tmpfs -o mode=0755,size=1m rehearsal-run "$run"
mkdir -p "$2"
mount --bind "$1" "$2"
mount -o remount,bind,ro "$2"
printf %s "$3" > /proc/sys/kernel/hostname
shift 3
exec "$@"
"""
"""In the container's own namespaces: a fresh tmpfs over the directory three levels above the
mount path (/var/run, that is /run: the container's own, as in its image), the pod's folder bound
read-only at the mount path, the pod's name as the hostname (as in a pod: a tuner names itself by
it in the lease), then the container's command."""


def in_mount_namespace(argv: list[str], folder: Path, hostname: str, mount_path: str = SERVICE_ACCOUNT_MOUNT) -> list[str]:
    """`argv` run where `folder` is at `mount_path`, a path that, unlike the others, is not
    rewritten in the container's strings: client libraries read the service account's files from
    that fixed path (client-go rest.InClusterConfig, benchmark/telemetry.py). unshare(1) makes a
    user namespace (root in it, this machine's user outside: no privilege needed where unprivileged
    user namespaces are allowed) with a mount namespace of its own, so nothing changes on this
    machine; a UTS namespace too, for the pod's hostname."""
    return ["unshare", "--user", "--map-root-user", "--mount", "--uts", "--propagation", "private",
            "/bin/sh", "-c", MOUNT_NAMESPACE_SCRIPT, "sh", str(folder), mount_path, hostname, *argv]


class Container:
    def __init__(self, spec: dict[str, Any], sidecar: bool):
        self.spec, self.sidecar, self.name = spec, sidecar, spec["name"]
        self.process: subprocess.Popen | None = None
        self.restarts = 0
        self.exit_codes: list[int] = []
        self.started_at = ""

    def status(self, restarting: bool) -> dict[str, Any]:
        """Its containerStatuses entry, in the Pod schema's field names; `restarting`: its pod
        restarts a container that exits (kubelet's back-off meanwhile)."""
        running = self.process is not None and self.process.poll() is None
        ended = {"exitCode": self.exit_codes[-1], "reason": "Completed" if self.exit_codes[-1] == 0 else "Error"} \
            if self.exit_codes else None
        if running:
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        elif ended and restarting:
            state = {"waiting": {"reason": "CrashLoopBackOff", "message": f"back-off restarting failed container {self.name}"}}
        elif ended:
            state = {"terminated": ended}
        else:
            state = {"waiting": {"reason": "ContainerCreating"}}
        status = {"name": self.name, "ready": running, "restartCount": self.restarts, "image": self.spec.get("image", ""),
                  "imageID": "", "state": state}
        if ended and (running or restarting):
            status["lastState"] = {"terminated": ended}
        return status


class LocalPod:
    """One pod of a workload, in build/rehearse/<stack>/pods/<pod name>/."""

    def __init__(self, workload: Workload, name: str, cluster: Cluster, node: Node, root: Path, supervisor: Supervisor,
                 timeline: Timeline, ports: dict[int, int] | None = None):
        """`ports`: the local port of each container port, where a Service sends to it; a port not
        given gets a free one."""
        self.workload, self.name, self.cluster, self.node = workload, name, cluster, node
        self.dir, self.supervisor, self.timeline = root / name, supervisor, timeline
        self.phase, self.reason, self.message = "Pending", "", ""
        self.labels = {**workload.pod_labels, **({"batch.kubernetes.io/job-name": workload.name} if workload.kind == "Job" else {})}
        spec = workload.pod
        self.init_containers = [Container(c, c.get("restartPolicy") == "Always") for c in spec.get("initContainers", [])]
        """In their order: a native sidecar is started and the next one follows; any other runs to
        completion first (Kubernetes docs, "Init Containers" and "Sidecar Containers")."""
        self.sidecars = [c for c in self.init_containers if c.sidecar]
        self.containers = [Container(c, False) for c in spec.get("containers", [])]
        self.restart_always = spec.get("restartPolicy", "Always") == "Always"
        self.grace_s = float(spec.get("terminationGracePeriodSeconds", 30))
        self.ports = {p["containerPort"]: (ports or {}).get(p["containerPort"]) or free_port()
                      for c in self.containers for p in c.spec.get("ports", [])}
        self.empty_dirs: dict[str, tuple[Path, int | None]] = {}
        self.volumes = self._volumes()
        self.stopping = threading.Event()
        self.deleted_at = ""
        self.markers: set[str] = set()

    # -- volumes ---------------------------------------------------------------------------------
    def _volumes(self) -> dict[str, Path]:
        folders: dict[str, Path] = {}
        for volume in self.workload.pod.get("volumes", []):
            name = volume["name"]
            folder = self.dir / "volumes" / name
            if "emptyDir" in volume:
                folder.mkdir(parents=True, exist_ok=True)
                limit = volume["emptyDir"].get("sizeLimit")
                self.empty_dirs[name] = (folder, quantity_bytes(limit) if limit else None)
            elif "configMap" in volume:
                self._write_items(folder, self.cluster.config_maps[volume["configMap"]["name"]], volume["configMap"].get("items"))
            elif "secret" in volume:
                self._write_items(folder, self.cluster.secrets.get(volume["secret"]["secretName"], {}), volume["secret"].get("items"))
            elif "projected" in volume:
                self._projected(folder, volume["projected"])
            elif "persistentVolumeClaim" in volume:
                folder = self.node.store_views[volume["persistentVolumeClaim"]["claimName"]]
            else:
                raise ValueError(f"pod {self.name}: volume {name} is of a kind the rehearsal does not run: {sorted(volume)}")
            folders[name] = folder
        return folders

    def _write_items(self, folder: Path, data: dict[str, str], items: list[dict] | None) -> None:
        chosen = items or [{"key": k, "path": k} for k in data]
        for item in chosen:
            target = folder / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self._resolve_services(data[item["key"]]))

    def _resolve_services(self, text: str) -> str:
        for address, local in self.node.services.items():
            text = text.replace(address, local)
        return text

    def _projected(self, folder: Path, projected: dict) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for source in projected.get("sources", []):
            if "serviceAccountToken" in source:
                (folder / source["serviceAccountToken"]["path"]).write_text(
                    service_account_token(self.workload.namespace, self.workload.pod.get("serviceAccountName") or "default"))
            elif "configMap" in source:
                for item in source["configMap"].get("items", []):
                    (folder / item["path"]).write_text(self.cluster.config_maps.get(source["configMap"]["name"], {}).get(item["key"], ""))
            elif "downwardAPI" in source:
                for item in source["downwardAPI"]["items"]:
                    (folder / item["path"]).write_text(self.field(item["fieldRef"]["fieldPath"]))

    # -- containers ------------------------------------------------------------------------------
    def field(self, path: str) -> str:
        """The downward API's fieldRef paths the rendered pods use."""
        if path == "metadata.name":
            return self.name
        if path == "metadata.namespace":
            return self.workload.namespace
        label = re.match(r"^metadata\.labels\['(.+)'\]$", path)
        if label:
            return self.labels.get(label[1], "")
        raise ValueError(f"pod {self.name}: fieldRef {path} is not one the rehearsal knows")

    def localizer(self, container: Container) -> Localizer:
        mounts = {m["mountPath"]: self.volumes[m["name"]] for m in container.spec.get("volumeMounts", [])}
        return Localizer(mounts, self.ports, self.node.services)

    def environment(self, container: Container, localize: Localizer) -> dict[str, str]:
        env: dict[str, str] = {}
        for item in container.spec.get("env", []):
            if "value" in item:
                value = ENV_REFERENCE.sub(lambda m: env.get(m[1], m[0]), str(item["value"]))
            elif "fieldRef" in item.get("valueFrom", {}):
                value = self.field(item["valueFrom"]["fieldRef"]["fieldPath"])
            elif "secretKeyRef" in item.get("valueFrom", {}):
                ref = item["valueFrom"]["secretKeyRef"]
                value = self.cluster.secrets.get(ref["name"], {}).get(ref["key"], "")
            else:
                raise ValueError(f"pod {self.name}: env {item['name']} comes from a source the rehearsal does not run")
            env[item["name"]] = localize.port_token(value) if value.isdigit() else localize(value)
        # What the image and kubelet give every container; HOME in the pod's own folder (the
        # image's home), so caches such as vLLM's stay out of this machine's.
        base = {"PATH": f"{self.node.bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", "LANG": "C.UTF-8",
                "HOSTNAME": self.name, "HOME": str(self.dir / "home")}
        return {**base, **self.node.environment, **env, **self.node.container_environment(self.name, container.name)}

    def start_container(self, container: Container) -> None:
        localize = self.localizer(container)
        env = self.environment(container, localize)
        argv = [ENV_REFERENCE.sub(lambda m: env.get(m[1], m[0]), a) for a in container.spec.get("command", []) + container.spec.get("args", [])]
        argv = localize.argv(argv)
        account = next((self.volumes[m["name"]] for m in container.spec.get("volumeMounts", [])
                        if m["mountPath"] == SERVICE_ACCOUNT_MOUNT), None)
        if account is not None:
            argv = in_mount_namespace(argv, account, self.name)
        log = self.dir / "logs" / f"{container.name}.log"
        if container.process is None:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"# rehearsal: {json.dumps(argv)}\n")
        container.process = self.supervisor.start(f"{self.name}/{container.name}", argv, env, self.dir, log)
        container.started_at = utc_now()
        self.timeline.event("container-start", f"{self.name}/{container.name}", f"pid {container.process.pid}",
                            restarts=container.restarts)

    # -- the pod's life --------------------------------------------------------------------------
    def run(self) -> None:
        """Start, supervise until every container ended (a Job's) or the pod is stopped, evicted
        or (Deployment) deleted; then stop the sidecars."""
        self.phase = "Running"
        self.timeline.event("pod-start", self.name, f"{self.workload.kind} {self.workload.name}")
        for init in self.init_containers:
            if init.sidecar:
                self.start_container(init)
            elif not self.run_to_completion(init):
                break
        for container in self.containers if not self.stopping.is_set() else []:
            self.start_container(container)
        restart_at: dict[str, float] = {}
        while not self.stopping.is_set():
            for container in self.sidecars + self.containers:
                process = container.process
                if process is None or process.poll() is None:
                    continue
                if container.name in restart_at:
                    if time.monotonic() >= restart_at[container.name]:
                        del restart_at[container.name]
                        container.restarts += 1
                        self.start_container(container)
                    continue
                code = process.returncode
                self.supervisor.forget(process)
                container.exit_codes.append(code)
                self.timeline.event("container-exit", f"{self.name}/{container.name}", f"exit code {code}")
                if container.sidecar or self.restart_always:
                    backoff = min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2 ** container.restarts)
                    restart_at[container.name] = time.monotonic() + backoff
                else:
                    container.process = None
            if not self.restart_always and all(c.process is None for c in self.containers):
                codes = [c.exit_codes[-1] for c in self.containers]
                self.phase = "Succeeded" if all(c == 0 for c in codes) else "Failed"
                self.reason = "" if self.phase == "Succeeded" else "Error"
                break
            self.check_storage()
            self.stopping.wait(0.5)
        self.stop_processes()
        self.remove_empty_dirs()
        self.timeline.event("pod-stop", self.name, f"phase {self.phase}{' (' + self.reason + ')' if self.reason else ''}"
                            f"{': ' + self.message if self.message else ''}")

    def run_to_completion(self, init: Container) -> bool:
        """An init container that is not a sidecar, run until it exits 0 (kubelet restarts a failed
        one with its back-off while the pod lives); False if the pod was stopped meanwhile."""
        while not self.stopping.is_set():
            self.start_container(init)
            while init.process.poll() is None and not self.stopping.wait(0.2):
                pass
            if self.stopping.is_set():
                return False
            code = init.process.returncode
            self.supervisor.forget(init.process)
            init.exit_codes.append(code)
            self.timeline.event("container-exit", f"{self.name}/{init.name}", f"exit code {code}")
            if code == 0:
                init.process = None
                return True
            if not self.restart_always:
                self.phase, self.reason = "Failed", "Init:Error"
                self.stopping.set()
                return False
            if self.stopping.wait(min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2 ** init.restarts)):
                return False
            init.restarts += 1
        return False

    def as_pod(self) -> dict[str, Any]:
        """The pod as the API lists it (Pod schema field names): a deleted pod whose containers
        are still stopping carries its deletionTimestamp; an evicted one stays in phase Failed."""
        phase = "Running" if self.terminating() else self.phase
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.workload.namespace, "labels": self.labels}
        if self.stopping.is_set() and self.reason != "Evicted":
            metadata["deletionTimestamp"] = self.deleted_at
        status: dict[str, Any] = {"phase": phase,
                                  "containerStatuses": [c.status(self.restart_always) for c in self.containers],
                                  "initContainerStatuses": [c.status(True) for c in self.sidecars]}
        if self.reason == "Evicted":
            status.update(reason=self.reason, message=self.message)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"nodeName": "rehearsal", "containers": [
            {"name": c.name, "image": c.spec.get("image", "")} for c in self.containers]}, "status": status}

    def terminating(self) -> bool:
        """Deleted, and its containers not all stopped yet."""
        return self.reason == "Deleted" and any(c.process is not None and c.process.poll() is None
                                                for c in self.containers + self.sidecars)

    def check_storage(self) -> None:
        for volume, (folder, limit) in self.empty_dirs.items():
            markers: set[str] = set()
            used = folder_bytes(folder, markers)
            for marker in sorted(markers - self.markers):
                self.timeline.event("marker", self.name, f"{volume}/{marker}")
            self.markers |= markers
            if limit is not None and used > limit:
                self.evict(EMPTYDIR_EVICTION.format(volume=volume, limit=self.limit_text(volume)))
                return

    def limit_text(self, volume: str) -> str:
        spec = next(v for v in self.workload.pod["volumes"] if v["name"] == volume)
        return str(spec["emptyDir"]["sizeLimit"])

    def evict(self, message: str) -> None:
        self.phase, self.reason, self.message = "Failed", "Evicted", message
        self.timeline.event("pod-evicted", self.name, message)
        self.stopping.set()

    def delete(self) -> None:
        self.deleted_at = self.deleted_at or utc_now()
        if self.phase in ("Pending", "Running"):
            self.phase, self.reason = "Succeeded" if self.workload.kind == "Deployment" else "Failed", "Deleted"
        self.stopping.set()

    def stop_processes(self) -> None:
        """The pod's containers (and an init container still running) get SIGTERM and its grace
        period; then its sidecars, last started first."""
        running_init = [c for c in self.init_containers if not c.sidecar]
        for container in self.containers + running_init + list(reversed(self.sidecars)):
            if container.process is not None and container.process.poll() is None:
                code = self.supervisor.stop(container.process, self.grace_s)
                self.timeline.event("container-stop", f"{self.name}/{container.name}", f"exit code {code}")
            elif container.process is not None:
                self.supervisor.forget(container.process)

    def remove_empty_dirs(self) -> None:
        """An emptyDir goes with its pod (its logs stay): a rehearsal leaves no GBs of pip installs behind."""
        for folder, _ in self.empty_dirs.values():
            shutil.rmtree(folder, ignore_errors=True)


class Controller:
    """A Job's or a Deployment's controller: keeps its pods, each in a thread of its own."""

    def __init__(self, workload: Workload, make_pod: Callable[[Workload, str], LocalPod], timeline: Timeline, serial: int = 0):
        """`serial`: where its pods' names start (a second controller of one workload names its own)."""
        self.workload, self.make_pod, self.timeline = workload, make_pod, timeline
        self.replicas = workload.replicas
        self.pods: list[LocalPod] = []
        self.threads: list[threading.Thread] = []
        self.failures = 0
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.serial = serial

    def pod_name(self) -> str:
        self.serial += 1
        digest = hashlib.sha256(f"{self.workload.name}-{self.serial}".encode()).hexdigest()
        return f"{self.workload.name}-{digest[:10]}" if self.workload.kind == "Deployment" else f"{self.workload.name}-{digest[:5]}"

    def live(self) -> list[LocalPod]:
        return [p for p in self.pods if p.phase in ("Pending", "Running")]

    def start_pod(self) -> None:
        pod = self.make_pod(self.workload, self.pod_name())
        thread = threading.Thread(target=pod.run, name=pod.name, daemon=True)
        self.pods.append(pod)
        self.threads.append(thread)
        thread.start()

    def reconcile(self) -> None:
        """One pass: replace what ended, as the controller would."""
        with self.lock:
            if self.done.is_set():
                return
            if self.workload.kind == "Job":
                ended = [p for p in self.pods if p.phase in ("Succeeded", "Failed")]
                if any(p.phase == "Succeeded" for p in ended):
                    self.finish("Complete")
                elif len(ended) > self.workload.backoff_limit:
                    self.finish("Failed", "BackoffLimitExceeded")
                elif not self.live():
                    if ended:
                        self.timeline.event("job-retry", self.workload.name, f"pod {len(ended)} of {self.workload.backoff_limit + 1} failed")
                    self.start_pod()
                return
            live = self.live()
            for pod in live[self.replicas:]:
                pod.delete()
            for _ in range(self.replicas - len(live)):
                self.start_pod()

    def finish(self, condition: str, reason: str = "") -> None:
        self.condition = condition
        self.timeline.event("job-" + condition.lower(), self.workload.name, reason)
        self.done.set()

    def stop(self) -> None:
        with self.lock:
            self.done.set()
            for pod in self.pods:
                pod.delete()
        for thread in self.threads:
            thread.join()


class ControlledWorkloads:
    """The Deployments' replica counts and every pod, for the Kubernetes API stand-in
    (rehearse/kubeapi.py Workloads): a scale request sets the Deployment's count and its
    controller acts on it at once; pods are listed while they hold anything (running, or deleted
    and still stopping) and, as kubelet leaves them, once evicted."""

    def __init__(self, controllers: dict[str, Controller]):
        self.controllers = controllers

    def deployments(self) -> list[str]:
        return [n for n, c in self.controllers.items() if c.workload.kind == "Deployment"]

    def replica_count(self, deployment: str) -> int:
        return self.controllers[deployment].replicas

    def set_replicas(self, deployment: str, replicas: int) -> None:
        controller = self.controllers[deployment]
        controller.replicas = replicas
        controller.reconcile()

    def list_pods(self, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
        return [pod.as_pod() for controller in list(self.controllers.values()) for pod in list(controller.pods)
                if pod.workload.namespace == namespace and all(pod.labels.get(k) == v for k, v in selector.items())
                and (pod.phase in ("Pending", "Running") or pod.terminating() or pod.reason == "Evicted")]
