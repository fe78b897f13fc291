"""The Pod Security Standards' controls, checked on a pod spec: which ones a pod breaks at baseline and restricted.

The Pod Security admission controller (``k8s.io/pod-security-admission``) cannot run here, so the chart's claim
that the agent needs the ``privileged`` level only for its hostPath volumes is measured with this reading of the
published standard (kubernetes.io, "Pod Security Standards", the baseline and restricted tables). Each check
returns the names of the controls the spec breaks, with what breaks them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["baseline_violations", "restricted_violations"]

_BASELINE_CAPS = frozenset(
    [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ]
)
_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
_SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
_RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or ()


def _contexts(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield spec.get("securityContext") or {}
    for c in _containers(spec):
        yield c.get("securityContext") or {}


def baseline_violations(spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """Baseline controls broken by a pod spec: control name -> what breaks it."""
    found: dict[str, list[str]] = {}

    def add(control: str, what: str) -> None:
        found.setdefault(control, []).append(what)

    for ctx in _contexts(spec):
        if (ctx.get("windowsOptions") or {}).get("hostProcess"):
            add("HostProcess", "windowsOptions.hostProcess")
        selinux = ctx.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in _SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            add("SELinux", str(selinux))
        if (ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
            add("Seccomp", "Unconfined")
        if (ctx.get("appArmorProfile") or {}).get("type") == "Unconfined":
            add("AppArmor", "Unconfined")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            add("Host Namespaces", key)
    for c in _containers(spec):
        ctx = c.get("securityContext") or {}
        if ctx.get("privileged"):
            add("Privileged Containers", c["name"])
        extra = set((ctx.get("capabilities") or {}).get("add") or ()) - _BASELINE_CAPS
        if extra:
            add("Capabilities", f"{c['name']}: {sorted(extra)}")
        if ctx.get("procMount", "Default") != "Default":
            add("/proc Mount Type", c["name"])
        for port in c.get("ports") or ():
            if port.get("hostPort"):
                add("Host Ports", f"{c['name']}: {port['hostPort']}")
    for volume in spec.get("volumes") or ():
        if "hostPath" in volume:
            add("HostPath Volumes", volume["name"])
    for sysctl in (spec.get("securityContext") or {}).get("sysctls") or ():
        if sysctl.get("name") not in _SAFE_SYSCTLS:
            add("Sysctls", str(sysctl.get("name")))
    return found


def restricted_violations(spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """Restricted controls broken by a pod spec (the baseline ones included)."""
    found = baseline_violations(spec)

    def add(control: str, what: str) -> None:
        found.setdefault(control, []).append(what)

    for volume in spec.get("volumes") or ():
        kinds = set(volume) - {"name"}
        if not kinds <= _RESTRICTED_VOLUMES:
            add("Volume Types", f"{volume['name']}: {sorted(kinds - _RESTRICTED_VOLUMES)}")
    pod_ctx = spec.get("securityContext") or {}
    for c in _containers(spec):
        ctx = c.get("securityContext") or {}
        if ctx.get("allowPrivilegeEscalation") is not False:
            add("Privilege Escalation", c["name"])
        if not ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")):
            add("Running as Non-root", c["name"])
        if ctx.get("runAsUser", pod_ctx.get("runAsUser")) == 0:
            add("Running as Non-root user", c["name"])
        seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            add("Seccomp (restricted)", c["name"])
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or ()) or set(caps.get("add") or ()) - {"NET_BIND_SERVICE"}:
            add("Capabilities (restricted)", c["name"])
    return found
