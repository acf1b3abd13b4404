"""Generate the protobuf modules of the 5.x gRPC proxy from its .proto files.

    python tools/generate_proto.py            # rewrite src/bolide/proxy/proto/*_pb2.py(i)
    python tools/generate_proto.py --check    # exit 1 when the committed files differ

The .proto files are apache/rocketmq-clients' (python/rocketmq/grpc_protocol/proto, Apache
License 2.0, headers kept). They are compiled from their own directory, so the registered
file names (``definition.proto``, ``service.proto``) and the serialized descriptors are
exactly those of the official Python SDK: both can be loaded in one process. protoc writes
``import definition_pb2``; the one rewrite made here turns it into a package-relative import.
The generated files are never edited by hand; ruff and mypy skip them.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

PROTO_DIR = Path(__file__).resolve().parent.parent / "src" / "bolide" / "proxy" / "proto"
PROTOS = ("definition.proto", "service.proto", "admin.proto")


def generate(out: Path) -> dict[str, str]:
    include = Path(protoc.__file__).parent / "_proto"
    arguments = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        *(str(PROTO_DIR / name) for name in PROTOS),
    ]
    if protoc.main(arguments) != 0:
        raise SystemExit("protoc failed")
    files: dict[str, str] = {}
    for path in sorted(out.iterdir()):
        text = path.read_text()
        text = re.sub(r"(?m)^import definition_pb2 as", "from . import definition_pb2 as", text)
        files[path.name] = text
    return files


def main() -> int:
    check = "--check" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as directory:
        files = generate(Path(directory))
    differing = [
        name
        for name, text in files.items()
        if not (PROTO_DIR / name).exists() or (PROTO_DIR / name).read_text() != text
    ]
    if check:
        for name in differing:
            print(f"{name}: differs from what protoc generates", file=sys.stderr)
        return 1 if differing else 0
    for name, text in files.items():
        (PROTO_DIR / name).write_text(text)
    print(f"wrote {len(files)} files to {PROTO_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
