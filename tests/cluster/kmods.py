"""Kernel modules with their dependencies, uncompressed, in load order (for tests/cluster/guest-modules.sh).

`python -m tests.cluster.kmods MODULE_DIR OUT NAME...`: each NAME and what its `depends=` field names, skipping
what the kernel has built in (`modules.builtin`), written to OUT/<name>.ko and listed in OUT/order.
"""

from __future__ import annotations

import gzip
import lzma
import re
import subprocess
import sys
from pathlib import Path

__all__ = ["load_order"]


def _blob(path: Path) -> bytes:
    raw = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(raw)
    if path.name.endswith(".gz"):
        return gzip.decompress(raw)
    if path.name.endswith(".zst"):
        return subprocess.run(["zstd", "-dcq"], input=raw, capture_output=True, check=True).stdout
    return raw


def load_order(module_dir: Path, names: list[str]) -> list[tuple[str, bytes]]:
    """The modules `names` need, dependencies first, with their uncompressed contents.

    Raises:
        FileNotFoundError: a module is neither in `module_dir` nor built in (its name is in the message).
    """
    paths = {}
    for path in module_dir.rglob("*.ko*"):
        match = re.match(r"(.*)\.ko(\.xz|\.zst|\.gz)?$", path.name)
        if match:
            paths[match[1].replace("-", "_")] = path
    builtin_file = module_dir / "modules.builtin"
    builtin = set()
    if builtin_file.exists():
        builtin = {
            Path(line.strip()).name.split(".ko")[0].replace("-", "_") for line in builtin_file.read_text().splitlines()
        }
    order: list[tuple[str, bytes]] = []

    def add(name: str) -> None:
        if name in builtin or any(name == done for done, _ in order):
            return
        if name not in paths:
            raise FileNotFoundError(f"kernel module {name} not found in {module_dir}")
        data = _blob(paths[name])
        depends = re.search(rb"\0depends=([^\0]*)\0", data)
        for dep in depends[1].decode().split(",") if depends and depends[1] else []:
            add(dep.replace("-", "_"))
        order.append((name, data))

    for name in names:
        add(name)
    return order


def main(argv: list[str]) -> int:
    """Write the modules and their order file; see the module docstring."""
    module_dir, out, names = Path(argv[0]), Path(argv[1]), argv[2:]
    out.mkdir(parents=True, exist_ok=True)
    order = load_order(module_dir, names)
    for name, data in order:
        (out / f"{name}.ko").write_bytes(data)
    (out / "order").write_text("".join(f"{name}\n" for name, _ in order))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
