#!/bin/bash
# vm-setup.sh — one-time setup for run-in-vm.sh on Debian 12 (bookworm), as root.
# podpin's copy of shared/vm/vm-setup.sh (the project owns it from here on).
# * apt-get installs qemu-system-x86 (the only package installed system-wide);
# * apt-get downloads (does NOT install) the Debian kernel + busybox-static and
#   unpacks them into $VM_DIR; /boot and /lib/modules are not touched;
# * writes $VM_DIR/kernel (uncompressed ELF vmlinux, booted via PVH) and
#   $VM_DIR/initramfs.cpio (static busybox + 9p/virtio/overlay modules + /init);
# * unpacks a container runtime for tests/vm/test_runtime_*.py into $VM_DIR/runtime
#   (never installed): containerd 1.7 from Debian 13 (the first Debian containerd
#   with NRI; its binaries need only libc), runc 1.1.5 from Debian 12 (Debian 13's
#   needs glibc 2.38) and the static busybox the test images are built from.
# Idempotent: a re-run is a no-op while $VM_DIR/setup-id matches this script and
# the kernel suite; a changed script rebuilds. Fresh machine: ~15-30 s, ~100 MB of
# downloads, ~185 MB in $VM_DIR (107 MB of it the runtime binaries).
# VM_DIR: $VM_DIR, else $PODPIN_VM_DIR, else /tmp/podpin-vm (what tests/vm/harness.py uses).
# VM_KERNEL_SUITE=bookworm-backports|trixie picks a newer kernel (6.12) through a
# private apt list under $VM_DIR/apt, without touching the system apt sources.
set -euo pipefail
VM_DIR=${VM_DIR:-${PODPIN_VM_DIR:-/tmp/podpin-vm}}
SUITE=${VM_KERNEL_SUITE:-}
SETUP_ID="$(sha256sum "$(realpath "$0")" | cut -c1-16) suite=${SUITE:-default}"
mkdir -p "$VM_DIR"; cd "$VM_DIR"
if [ -s kernel ] && [ -s initramfs.cpio ] && [ "$(cat setup-id 2>/dev/null)" = "$SETUP_ID" ] \
   && command -v qemu-system-x86_64 >/dev/null && [ -f /usr/share/qemu/qboot.rom ]; then
  echo "vm-setup: already set up in $VM_DIR ($(cat kver))"; exit 0
fi
rm -f setup-id
export DEBIAN_FRONTEND=noninteractive
if ! command -v qemu-system-x86_64 >/dev/null || [ ! -f /usr/share/qemu/qboot.rom ]; then
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends qemu-system-x86 >/dev/null
fi

APT=()
if [ -n "$SUITE" ]; then
  mkdir -p apt/lists/partial apt/cache/archives/partial
  echo "deb http://deb.debian.org/debian $SUITE main" > apt/sources.list
  APT=(-o Dir::Etc::SourceList="$VM_DIR/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
       -o Dir::State::Lists="$VM_DIR/apt/lists" -o Dir::Cache="$VM_DIR/apt/cache")
  apt-get "${APT[@]}" update -q >/dev/null
fi
kpkg() { apt-cache "${APT[@]}" depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}' || true; }
KPKG=$(kpkg)
[ -n "$KPKG" ] || { apt-get update -q >/dev/null; KPKG=$(kpkg); }
rm -rf debs root && mkdir -p debs root
download() { (cd debs && apt-get "${APT[@]}" download -q "$KPKG" && apt-get download -q busybox-static) 2>&1 | grep -v unsandboxed || true; }
download
if ! ls debs/linux-image-*.deb debs/busybox-static_*.deb >/dev/null 2>&1; then   # stale lists -> 404
  apt-get "${APT[@]}" update -q >/dev/null; [ -n "$SUITE" ] && apt-get update -q >/dev/null
  KPKG=$(kpkg); download
fi
for d in debs/*.deb; do dpkg -x "$d" root; done
KVER=${KPKG#linux-image-}
echo "$KVER" > kver

# Uncompressed ELF vmlinux: QEMU boots it through its PVH entry (CONFIG_PVH=y),
# skipping the in-guest decompression (~3 s under TCG). Fallback: the bzImage.
rm -f kernel vmlinux
python3 - "root/boot/vmlinuz-$KVER" vmlinux <<'EOF' || ln -sf "root/boot/vmlinuz-$KVER" kernel
import lzma, subprocess, sys
data = open(sys.argv[1], 'rb').read()
xz, zst = data.find(b'\xfd7zXZ\x00'), data.find(b'\x28\xb5\x2f\xfd')
if xz > 0:
    out = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[xz:])
elif zst > 0:   # Debian >= 6.12 kernels are zstd-compressed
    out = subprocess.run(["zstd", "-dcq"], input=data[zst:], capture_output=True).stdout
else:
    sys.exit("vm-setup: unknown bzImage payload, booting the bzImage instead")
if not out.startswith(b'\x7fELF'):
    sys.exit("vm-setup: payload is not ELF, booting the bzImage instead")
open(sys.argv[2], 'wb').write(out)
EOF
[ -e kernel ] || ln -sf vmlinux kernel

# initramfs: static busybox + the modules needed for a 9p root, virtio serial
# ports and overlayfs, in dependency order (taken from each module's modinfo).
rm -rf initramfs && mkdir -p initramfs/{bin,dev,proc,sys,newroot,ovl,lib/modules}
cp root/bin/busybox initramfs/bin/busybox
for t in sh mount mkdir insmod poweroff reboot chroot cat echo sed chmod ip; do ln -sf busybox "initramfs/bin/$t"; done
python3 - "root/lib/modules/$KVER" initramfs/lib/modules <<'EOF'
import lzma, os, re, subprocess, sys
moddir, dst = sys.argv[1], sys.argv[2]
want = ["9p", "9pnet_virtio", "virtio_pci", "virtio_console", "overlay"]
path = {}
for dp, _, fs in os.walk(moddir):
    for f in fs:
        m = re.match(r"(.*)\.ko(\.xz|\.zst|\.gz)?$", f)
        if m:
            path[m.group(1).replace("-", "_")] = os.path.join(dp, f)
def blob(p):
    raw = open(p, "rb").read()
    if p.endswith(".xz"):
        return lzma.decompress(raw)
    if p.endswith(".zst"):
        return subprocess.run(["zstd", "-dcq"], input=raw, capture_output=True, check=True).stdout
    if p.endswith(".gz"):
        import gzip; return gzip.decompress(raw)
    return raw
builtin = set()
bf = os.path.join(moddir, "modules.builtin")
if os.path.exists(bf):
    builtin = {os.path.basename(l.strip()).split(".ko")[0].replace("-", "_") for l in open(bf)}
order = []
def add(name):
    if name in order or name in builtin:
        return
    if name not in path:
        sys.exit("vm-setup: module %s not found" % name)
    data = blob(path[name])
    m = re.search(rb"\0depends=([^\0]*)\0", data)
    for d in (m.group(1).decode().split(",") if m and m.group(1) else []):
        add(d.replace("-", "_"))
    order.append(name)
    open(os.path.join(dst, name + ".ko"), "wb").write(data)
for w in want:
    add(w)
open(os.path.join(dst, "order"), "w").write("".join(n + "\n" for n in order))
print("vm-setup: modules:", " ".join(order) or "(all built in)")
EOF

cat > initramfs/init <<'EOF'
#!/bin/sh
# Guest PID 1: host / read-only over 9p at /newroot, tmpfs overlays on /tmp,
# /var/tmp, /root, cgroup2 at /sys/fs/cgroup, loopback up (for 127.0.0.1 test
# servers), then chroot and run vm.cmd; its exit code goes to the vm.rc virtio
# port, then power off.
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
for m in $(cat /lib/modules/order); do
  [ -d /sys/module/$m ] || insmod /lib/modules/$m.ko || echo "vm-init: insmod $m failed"
done
for a in $(cat /proc/cmdline); do
  case "$a" in vm.cmd=*) CMD=${a#vm.cmd=};; vm.rw=*) RW=${a#vm.rw=};; vm.cg=*) CG=${a#vm.cg=};; esac
done
R=/newroot
O9=trans=virtio,version=9p2000.L,access=any,msize=524288
mount -t 9p -o ro,$O9,cache=loose hostroot $R || { echo "vm-init: 9p root mount failed"; poweroff -f; }
mount -t tmpfs -o mode=755 tmpfs /ovl
for d in /tmp /var/tmp /root; do
  [ -d $R$d ] || continue
  n=$(echo $d | sed 's#/#_#g'); mkdir -p /ovl/$n/u /ovl/$n/w
  mount -t overlay overlay -o lowerdir=$R$d,upperdir=/ovl/$n/u,workdir=/ovl/$n/w $R$d || mount -t tmpfs tmpfs $R$d
done
chmod 1777 $R/tmp $R/var/tmp 2>/dev/null
i=0
for d in $(echo "$RW" | sed 's/,/ /g'); do
  mount -t 9p -o $O9 rw$i $R$d || echo "vm-init: rw mount of $d failed"
  i=$((i+1))
done
mount -t proc proc $R/proc; mount -t sysfs sysfs $R/sys; mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts; mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
mount -t tmpfs -o mode=755 tmpfs $R/run
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup
[ -n "$CG" ] && { echo "$CG" | sed 's/,/ /g' > $R/sys/fs/cgroup/cgroup.subtree_control || echo "vm-init: cannot enable $CG"; }
ip link set lo up || echo "vm-init: cannot bring up lo"
port() { for p in /sys/class/virtio-ports/*; do [ "$(cat $p/name)" = "$1" ] && echo /dev/${p##*/} && return; done; echo /dev/console; }
OUT=$(port vm.stdout); ERR=$(port vm.stderr); RC=$(port vm.rc)
echo started > "$RC"
chroot $R /bin/sh "$CMD" </dev/null >"$OUT" 2>"$ERR"
echo "rc=$?" > "$RC"
poweroff -f; reboot -f
EOF
chmod 755 initramfs/init
(cd initramfs && find . | ../root/bin/busybox cpio -o -H newc > ../initramfs.cpio 2>/dev/null)

# The container runtime, through a private apt list for Debian 13 (the system's sources stay untouched).
RT_SUITE=${VM_RUNTIME_SUITE:-trixie}
mkdir -p apt-runtime/lists/partial apt-runtime/cache/archives/partial
echo "deb http://deb.debian.org/debian $RT_SUITE main" > apt-runtime/sources.list
RT_APT=(-o Dir::Etc::SourceList="$VM_DIR/apt-runtime/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o Dir::State::Lists="$VM_DIR/apt-runtime/lists" -o Dir::Cache="$VM_DIR/apt-runtime/cache")
apt-get "${RT_APT[@]}" update -q >/dev/null
rm -rf debs-runtime runtime && mkdir -p debs-runtime runtime/bin runtime/x
rt_download() { (cd debs-runtime && apt-get "${RT_APT[@]}" download -q containerd && apt-get download -q runc) 2>&1 | grep -v unsandboxed || true; }
rt_download
if ! ls debs-runtime/containerd_*.deb debs-runtime/runc_*.deb >/dev/null 2>&1; then   # stale lists -> 404
  apt-get "${RT_APT[@]}" update -q >/dev/null; apt-get update -q >/dev/null; rt_download
fi
for d in debs-runtime/*.deb; do dpkg-deb -x "$d" runtime/x; done
for b in containerd containerd-shim-runc-v2 ctr; do cp runtime/x/usr/bin/$b runtime/bin/; done
cp runtime/x/usr/sbin/runc runtime/bin/runc    # Debian 12's (its usr/bin/runc is only a symlink to it)
cp root/bin/busybox runtime/busybox
rm -rf runtime/x debs-runtime apt-runtime   # the lists alone are ~20 MB
{ runtime/bin/containerd --version; runtime/bin/runc --version | head -n 1; } > runtime/versions
runtime/bin/containerd --version | grep -q ' 1\.7\.' || { echo "vm-setup: not containerd 1.7: $(cat runtime/versions)" >&2; exit 1; }

rm -rf debs root/lib root/usr root/bin root/etc initramfs   # keep only root/boot (bzImage fallback): ~80 MB left
echo "$SETUP_ID" > setup-id   # written last: a half-done setup is never taken for a finished one
echo "vm-setup: kernel $KVER ($(basename "$(readlink kernel)")), initramfs $(du -h initramfs.cpio | cut -f1), runtime $(du -sh runtime | cut -f1) ($(head -n 1 runtime/versions | cut -d" " -f3), $(sed -n 2p runtime/versions)), in $VM_DIR"
