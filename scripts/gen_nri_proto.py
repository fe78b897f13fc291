#!/usr/bin/env python3
"""Generate the Python protobuf modules of podpin's NRI protocol subset.

Inputs: ``agent/nri/proto/nri.proto`` (the NRI messages podpin uses) and
``agent/nri/proto/ttrpc.proto`` (the ttrpc envelopes). Outputs, next to them:
``nri_pb2.py``, ``nri_pb2.pyi``, ``ttrpc_pb2.py``, ``ttrpc_pb2.pyi``.

The compiler is the ``grpc_tools.protoc`` of the pinned ``grpcio-tools`` (the
``proto`` extra in pyproject.toml), so everyone generates byte-identical files;
``tests/unit/nri/test_proto.py`` regenerates into a temporary
directory and compares. The include root is the repository, so the files
register in protobuf's descriptor pool as ``agent/nri/proto/*.proto``: a
library that registers its own ``api.proto`` cannot collide with them.

Run: ``.venv/bin/python scripts/gen_nri_proto.py [--out DIR]`` (default: the
repository itself).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTOS = ("agent/nri/proto/nri.proto", "agent/nri/proto/ttrpc.proto")


def generate(out: Path) -> list[Path]:
    """Compile the protos into ``out`` (mirroring their repository paths); return the files written."""
    from grpc_tools import protoc  # type: ignore[import-untyped]  # grpcio-tools ships no type information

    out.mkdir(parents=True, exist_ok=True)
    args = ["protoc", f"-I{REPO}", f"--python_out={out}", f"--pyi_out={out}", *PROTOS]
    code = protoc.main(args)
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}: {' '.join(args)}")
    return sorted(out / name.replace(".proto", suffix) for name in PROTOS for suffix in ("_pb2.py", "_pb2.pyi"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO, help="output root (default: the repository)")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
