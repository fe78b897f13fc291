#!/bin/bash
# run-in-vm.sh CMD [ARGS...]
# podpin's copy of shared/vm/run-in-vm.sh (the project owns it from here on).
# Boots the Debian kernel prepared by vm-setup.sh in QEMU with N vCPUs spread
# over M NUMA nodes, with the host's / shared read-only (9p) so host Python and
# venvs work, cgroup2 mounted at /sys/fs/cgroup with +cpu +cpuset enabled, and
# runs CMD as root in the current directory (with RUN_IN_VM=1 set). CMD's stdout/stderr are streamed
# to ours; the script exits with CMD's exit code (124 on VM timeout, 125 when
# the VM produced no exit code — the guest console is then printed to stderr).
#
# Env knobs: VM_DIR ($PODPIN_VM_DIR, else /tmp/podpin-vm)  VM_CPUS (8)  VM_NODES (2)  VM_MEM_MB (2048)
#   VM_SOCKETS (= VM_NODES)  VM_THREADS (1; 2 = SMT, sibling threads get consecutive CPU ids)
#   VM_CONSOLE_LOG (file that receives a copy of the guest console after every run, also on success)
#   VM_TIMEOUT (300 s, per boot)  VM_BOOT_RETRIES (1: re-boot if the guest never reached CMD)
#   VM_BOOT_TIMEOUT (60 s: a boot that has not started CMD by then counts as hung; 0 = no limit)
#   VM_POWEROFF_GRACE (20 s: a guest that recorded CMD's exit code but is still up then is stopped)
#   VM_RW="dir1 dir2" host dirs writable in the guest
#   (default: none; /tmp, /var/tmp, /root are writable tmpfs overlays that vanish)
#   VM_CGROUP_ENABLE (+cpu,+cpuset; empty = leave root subtree_control alone)
#   VM_ACCEL (tcg; 'kvm' only works where /dev/kvm is real hardware KVM)
#   VM_CPU_MODEL (Haswell-noTSX-IBRS minus TCG-unsupported bits)  VM_QEMU_OPTS (extra qemu args, word-split)
#   VM_ENV="NAME1 NAME2" extra env vars to pass (PATH, cwd, VIRTUAL_ENV, PYTHONPATH always are)
#   VM_APPEND (extra kernel args)  VM_CONSOLE=1 (guest console on stdout, for debugging)
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
VM_DIR=${VM_DIR:-${PODPIN_VM_DIR:-/tmp/podpin-vm}}
CPUS=${VM_CPUS:-8}; NODES=${VM_NODES:-2}; MEM=${VM_MEM_MB:-2048}
SOCKETS=${VM_SOCKETS:-$NODES}; THREADS=${VM_THREADS:-1}
TIMEOUT=${VM_TIMEOUT:-300}; ACCEL=${VM_ACCEL:-tcg}; BOOT_TIMEOUT=${VM_BOOT_TIMEOUT:-60}
POWEROFF_GRACE=${VM_POWEROFF_GRACE:-20}
CG=${VM_CGROUP_ENABLE-+cpu,+cpuset}
[ -s "$VM_DIR/kernel" ] && [ -s "$VM_DIR/initramfs.cpio" ] && command -v qemu-system-x86_64 >/dev/null \
  || { echo "run-in-vm: run tests/vm/vm-setup.sh first (VM_DIR=$VM_DIR)" >&2; exit 125; }
(( CPUS % NODES == 0 && MEM % NODES == 0 )) || { echo "run-in-vm: VM_CPUS and VM_MEM_MB must be multiples of VM_NODES" >&2; exit 2; }
(( CPUS % (SOCKETS * THREADS) == 0 && (CPUS / NODES) % THREADS == 0 )) \
  || { echo "run-in-vm: VM_CPUS must split into VM_SOCKETS x cores x VM_THREADS, and no core across two NUMA nodes" >&2; exit 2; }

T=$(mktemp -d /tmp/run-in-vm.XXXXXX)   # must live on the host / (seen by the guest)
qpid=; c1=; c2=; wpid=
cleanup() {
  [ -n "$qpid" ] && kill "$qpid" 2>/dev/null; kill $c1 $c2 $wpid 2>/dev/null
  [ -n "${VM_CONSOLE_LOG:-}" ] && [ -f "$T/console.log" ] && cp "$T/console.log" "$VM_CONSOLE_LOG" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT; trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP
q() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }   # POSIX sh quoting (guest runs dash)
{
  echo "cd $(q "$PWD") 2>/dev/null || cd /"
  echo "export PATH=$(q "$PATH") HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 RUN_IN_VM=1"
  for v in VIRTUAL_ENV PYTHONPATH ${VM_ENV:-}; do
    [ -n "${!v+x}" ] && echo "export $v=$(q "${!v}")"
  done
  printf 'exec'; for a in "$@"; do printf ' %s' "$(q "$a")"; done; echo
} > "$T/cmd.sh"
numa=(); per_cpu=$((CPUS / NODES)); per_mem=$((MEM / NODES))
for ((n = 0; n < NODES; n++)); do
  numa+=(-object "memory-backend-ram,id=m$n,size=${per_mem}M"
         -numa "node,nodeid=$n,cpus=$((n * per_cpu))-$(((n + 1) * per_cpu - 1)),memdev=m$n")
done
rw=(); rwlist=""; i=0
for d in ${VM_RW:-}; do
  d=$(realpath "$d"); rw+=(-fsdev "local,id=rw$i,path=$d,security_model=none,multidevs=remap" -device "virtio-9p-pci,fsdev=rw$i,mount_tag=rw$i")
  rwlist+="${rwlist:+,}$d"; i=$((i + 1))
done
if [ "${VM_CONSOLE:-0}" = 1 ]; then console=(-serial stdio); quiet="loglevel=4"
else console=(-serial "file:$T/console.log"); quiet="loglevel=7"; fi   # full kernel log, to a file only
# Haswell minus the bits TCG lacks: ~25% faster boot than -cpu max, and no per-vCPU warnings.
cpu=${VM_CPU_MODEL:-Haswell-noTSX-IBRS,-pcid,-x2apic,-tsc-deadline,-invpcid,-spec-ctrl}
[ "${ACCEL%%,*}" = kvm ] && cpu=${VM_CPU_MODEL:-host}

boot() {   # one VM boot; sets qrc
  : > "$T/rc"; rm -f "$T/out" "$T/err" "$T/qemu.err" "$T/console.log" "$T/boot-timeout" "$T/reaped"
  # Guest stdout/stderr arrive through FIFOs relayed by cat, so our own fds keep
  # normal offset semantics (a chardev opened on /dev/stdout would bypass them).
  mkfifo "$T/out" "$T/err"
  cat "$T/out" & c1=$!
  cat "$T/err" >&2 & c2=$!
  # qemu's own messages are printed after the guest's (below), so the guest's stderr always comes first.
  timeout -k 5 "$TIMEOUT" qemu-system-x86_64 \
    -accel "$ACCEL" -machine pc -bios /usr/share/qemu/qboot.rom -cpu "$cpu" \
    -m "$MEM" -smp "$CPUS,sockets=$SOCKETS,cores=$((CPUS / SOCKETS / THREADS)),threads=$THREADS" "${numa[@]}" \
    -kernel "$VM_DIR/kernel" -initrd "$VM_DIR/initramfs.cpio" \
    -append "console=ttyS0 $quiet panic=-1 oops=panic nokaslr mitigations=off cryptomgr.notests random.trust_cpu=on vm.cmd=$T/cmd.sh vm.rw=$rwlist vm.cg=$CG ${VM_APPEND:-}" \
    -fsdev "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap" \
    -device virtio-9p-pci,fsdev=root,mount_tag=hostroot "${rw[@]}" \
    -device virtio-serial-pci \
    -chardev "file,id=out,path=$T/out" -device virtserialport,chardev=out,name=vm.stdout \
    -chardev "file,id=err,path=$T/err" -device virtserialport,chardev=err,name=vm.stderr \
    -chardev "file,id=rc,path=$T/rc" -device virtserialport,chardev=rc,name=vm.rc \
    "${console[@]}" -display none -monitor none -nodefaults -no-user-config -no-reboot ${VM_QEMU_OPTS:-} \
    </dev/null 2>"$T/qemu.err" &
  qpid=$!
  # The watcher: a hung boot costs BOOT_TIMEOUT, not TIMEOUT (hangs happen before CMD starts); a guest that
  # recorded CMD's exit code but has not powered off POWEROFF_GRACE s later (a TCG guest starved on a loaded
  # machine, seen in CI) is stopped then, instead of at TIMEOUT: its answer is already in.
  ( for ((s = 0; ; s++)); do
      sleep 0.25; kill -0 $qpid 2>/dev/null || exit 0
      if grep -q '^rc=' "$T/rc" 2>/dev/null; then
        for ((g = 0; g < POWEROFF_GRACE * 4; g++)); do sleep 0.25; kill -0 $qpid 2>/dev/null || exit 0; done
        : > "$T/reaped"; kill $qpid; exit 0
      fi
      if (( BOOT_TIMEOUT > 0 && s >= BOOT_TIMEOUT * 4 )) && ! grep -q '^started' "$T/rc" 2>/dev/null; then
        echo "$BOOT_TIMEOUT" > "$T/boot-timeout"; kill $qpid; exit 0
      fi
    done ) &
  wpid=$!
  wait $qpid; qrc=$?; qpid=
  kill $wpid 2>/dev/null; wait $wpid 2>/dev/null; wpid=
  # If qemu died before opening the FIFOs, a no-op open (O_RDWR never blocks) lets the cats finish.
  exec 3<>"$T/out" 4<>"$T/err"; exec 3>&- 4>&-
  wait $c1 $c2 2>/dev/null; c1=; c2=
  if [ -f "$T/reaped" ]; then   # qemu's "terminating on signal" is ours, not news
    grep -v 'terminating on signal' "$T/qemu.err" >&2
    echo "run-in-vm: the guest recorded its exit code but did not power off within $POWEROFF_GRACE s; qemu stopped" >&2
  else
    cat "$T/qemu.err" >&2
  fi
}

for ((attempt = 0; ; attempt++)); do
  boot
  rc=$(sed -n 's/^rc=\([0-9][0-9]*\)$/\1/p' "$T/rc" | tail -n 1)
  [ -n "$rc" ] && exit "$rc"
  grep -q '^started' "$T/rc" && break            # CMD ran but never finished: no retry
  (( attempt < ${VM_BOOT_RETRIES:-1} )) || break  # boot itself failed/hung: retry
  if [ -f "$T/boot-timeout" ]; then echo "run-in-vm: guest did not reach CMD within $BOOT_TIMEOUT s, retrying boot" >&2
  else echo "run-in-vm: guest did not reach CMD (qemu rc=$qrc), retrying boot" >&2; fi
done
if [ -f "$T/console.log" ]; then
  cp "$T/console.log" "$VM_DIR/last-failed-console.log" 2>/dev/null
  echo "run-in-vm: no exit code from guest (qemu rc=$qrc); last console lines (full log: $VM_DIR/last-failed-console.log):" >&2
  tail -n 30 "$T/console.log" >&2
  # A guest stopped mid-line leaves the console unterminated: end that line so the next message starts its own.
  if [ -n "$(tail -c 1 "$T/console.log")" ]; then echo >&2; fi
fi
[ -f "$T/boot-timeout" ] && { echo "run-in-vm: guest did not reach CMD within VM_BOOT_TIMEOUT=$BOOT_TIMEOUT s" >&2; exit 124; }
[ "$qrc" = 124 ] && { echo "run-in-vm: VM_TIMEOUT=$TIMEOUT s reached" >&2; exit 124; }
exit 125
