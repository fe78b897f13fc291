#!/usr/bin/env bash
# tests/runtime/build.sh — build the container runtimes of the VM runtime matrix from their Go modules.
#
#   tests/runtime/build.sh containerd-2.4 runc    # build these (each a folder here holding a go.mod)
#   tests/runtime/build.sh all                    # every folder here
#
# Each module's binaries go to ${PODPIN_RUNTIMES_DIR:-/tmp/podpin-runtimes}/<name>/bin; a build whose go.mod and
# go.sum are unchanged since the last one is skipped (the stamp is their hash), so a second run costs nothing.
# Go comes from PATH or /usr/local/go/bin and must be at least each go.mod's `go` line (1.25 to 1.26.8 here: Debian
# 12's golang-go 1.19 is too old); modules from the Go module proxy (GOPROXY as configured). Builds run
# under `nice` on few cores: about 4 minutes per containerd on 2 cores, cold. containerd is built without cgo
# (no btrfs or devmapper snapshotters: the VM uses "native"), runc with cgo (its nsenter is C) and seccomp
# (libseccomp-dev on the host, whose libseccomp.so.2 the guest shares): containerd 2.x runs the real kubelet's pod
# sandboxes with the runtime's default seccomp profile, which a runc without it refuses ("seccomp not supported").
# The stamp covers the build tags too.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out_root="${PODPIN_RUNTIMES_DIR:-/tmp/podpin-runtimes}"
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "tests/runtime/build.sh: no go in PATH or /usr/local/go/bin" >&2; exit 2; }
# One build at a time (scripts/test builds in the background while a test may ask for the same runtime).
mkdir -p "$out_root"
exec 9>"$out_root/.build.lock"
flock 9
names=("$@")
if [ ${#names[@]} -eq 0 ] || [ "${names[0]}" = all ]; then
  names=()
  for mod in "$here"/*/go.mod; do names+=("$(basename "$(dirname "$mod")")"); done
fi
for name in "${names[@]}"; do
  src="$here/$name"
  [ -f "$src/go.mod" ] || { echo "tests/runtime/build.sh: $name: no $src/go.mod" >&2; exit 2; }
  dest="$out_root/$name"
  case "$name" in
    runc*) cgo=1 tags="seccomp" ;;
    *) cgo=0 tags="no_btrfs no_devmapper no_zfs" ;;
  esac
  stamp=$({ cat "$src/go.mod" "$src/go.sum"; echo "tags: $tags"; } | sha256sum | cut -c1-16)
  if [ "$(cat "$dest/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "tests/runtime/build.sh: $name up to date in $dest"
    continue
  fi
  echo "tests/runtime/build.sh: building $name into $dest"
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp/bin"
  # The go.mod's tool directives: a `tool (...)` block or single `tool path` lines.
  tools=$(sed -n -e '/^tool (/,/^)/{/^\t/p}' -e 's/^tool \([^ (]*\)$/\1/p' "$src/go.mod" | tr -d '\t')
  for tool in $tools; do
    (cd "$src" && CGO_ENABLED=$cgo nice -n 10 go build -trimpath -tags "$tags" -o "$dest.tmp/bin/" "$tool")
  done
  echo "$stamp" > "$dest.tmp/stamp"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  ls "$dest/bin"
done
