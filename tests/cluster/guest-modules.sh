#!/usr/bin/env bash
# tests/cluster/guest-modules.sh — the kernel modules the cluster's guest needs beyond the VM initramfs's: a NIC
# (virtio_net, for QEMU's user network) and the CNI bridge's (bridge, veth), with their dependencies, uncompressed,
# for the guest to insmod. Taken from the same Debian kernel package as the VM's kernel ($VM_DIR/kver), downloaded
# with apt-get download (never installed), into $PODPIN_K8S_DIR/guest-modules/<kver>/ (order: the insmod order).
# Skipped when present. About 70 MB downloaded once.
set -euo pipefail
cd "$(dirname "$0")/../.."
VM_DIR=${VM_DIR:-${PODPIN_VM_DIR:-/tmp/podpin-vm}}
kver=$(cat "$VM_DIR/kver")
out=${PODPIN_K8S_DIR:-/tmp/podpin-k8s}/guest-modules/$kver
[ -s "$out/order" ] && { echo "guest modules for $kver present in $out"; exit 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -q "linux-image-$kver" 2>&1 | grep -v unsandboxed || true)
ls "$work"/linux-image-*.deb >/dev/null 2>&1 || { apt-get update -q >/dev/null; (cd "$work" && apt-get download -q "linux-image-$kver"); }
dpkg -x "$work"/linux-image-*.deb "$work/root"
mkdir -p "$out.tmp"
py=.venv/bin/python; [ -x "$py" ] || py=python3
"$py" -m tests.cluster.kmods "$work/root/lib/modules/$kver" "$out.tmp" virtio_net bridge veth
rm -rf "$out" && mv "$out.tmp" "$out"
echo "guest modules for $kver: $(tr '\n' ' ' < "$out/order")"
