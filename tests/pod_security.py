"""The Kubernetes Pod Security Standards' checks (kubernetes.io/docs/concepts/security/pod-security-standards,
"Baseline" and "Restricted", Kubernetes 1.35), over a pod template as the plan renders it: what Pod
Security Admission would refuse in a namespace that enforces the level. Each check names the field."""
from __future__ import annotations

BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                         "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
LEVELS = ("privileged", "baseline", "restricted")


def containers(pod: dict) -> list[dict]:
    return [*pod.get("initContainers", []), *pod.get("containers", []), *pod.get("ephemeralContainers", [])]


def baseline_violations(pod: dict) -> list[str]:
    found = [f"spec.{field}" for field in ("hostNetwork", "hostPID", "hostIPC") if pod.get(field)]
    found += [f"volumes[{v['name']}].hostPath" for v in pod.get("volumes", []) if "hostPath" in v]
    pod_context = pod.get("securityContext", {})
    for sysctl in pod_context.get("sysctls", []):
        if sysctl["name"] not in SAFE_SYSCTLS:
            found.append(f"securityContext.sysctls[{sysctl['name']}]")
    contexts = [("pod", pod_context)] + [(c["name"], c.get("securityContext", {})) for c in containers(pod)]
    for name, context in contexts:
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append(f"{name}.seccompProfile Unconfined")
        if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
            found.append(f"{name}.appArmorProfile Unconfined")
        selinux = context.get("seLinuxOptions") or {}
        if selinux.get("user") or selinux.get("role") or selinux.get("type") not in (None, "", "container_t", "container_init_t",
                                                                                    "container_kvm_t", "container_engine_t"):
            found.append(f"{name}.seLinuxOptions")
    for container in containers(pod):
        context = container.get("securityContext", {})
        if context.get("privileged"):
            found.append(f"{container['name']}.privileged")
        added = set((context.get("capabilities") or {}).get("add", [])) - BASELINE_CAPABILITIES
        if added:
            found.append(f"{container['name']}.capabilities.add {sorted(added)}")
        if context.get("procMount") not in (None, "Default"):
            found.append(f"{container['name']}.procMount")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            found.append(f"{container['name']}.ports.hostPort")
    return found


def restricted_violations(pod: dict) -> list[str]:
    found = baseline_violations(pod)
    found += [f"volumes[{v['name']}] type" for v in pod.get("volumes", []) if not set(v) - {"name"} <= RESTRICTED_VOLUMES]
    pod_context = pod.get("securityContext", {})
    for container in containers(pod):
        context = container.get("securityContext", {})
        name = container["name"]
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}.allowPrivilegeEscalation")
        if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
            found.append(f"{name}.runAsNonRoot")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            found.append(f"{name}.runAsUser 0")
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}.seccompProfile")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{name}.capabilities.drop ALL")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}.capabilities.add")
    return found


def violations(pod: dict, level: str) -> list[str]:
    return {"privileged": lambda p: [], "baseline": baseline_violations, "restricted": restricted_violations}[level](pod)
