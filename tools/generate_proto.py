"""Generate the 5.x gRPC proxy's protobuf modules from the official Python SDK's descriptors.

    python tools/generate_proto.py            # write src/bolide/proxy/proto/*_pb2.py(i)
    python tools/generate_proto.py --check    # exit 1 when the installed files differ

The 5.x protocol is Apache RocketMQ's (apache/rocketmq-apis), not ours, so no copy of it is
kept in this repository. The install obtains it from a pinned registry package: setup.py lists
``rocketmq-python-client`` (version ``SDK_VERSION``) among its build requirements and runs this
file during the build, as it compiles the Cython hot path. The SDK ships the modules protoc
generated for it; each holds its ``.proto`` file's serialized descriptor. This file reads those
descriptors from the installed distribution's files (never importing the SDK, whose top-level
package name ``rocketmq`` is also the old C++ client's), hands them to protoc as a descriptor
set (``--descriptor_set_in``), and keeps what protoc writes, Python modules and type stubs, with
one rewrite: protoc's ``import definition_pb2`` becomes a package-relative import. The
registered file names (``definition.proto``, ``service.proto``) and the serialized descriptors
are therefore exactly the SDK's, and both can be loaded in one process.

Errors: ``SystemExit`` naming the missing distribution, its version or protoc's failure.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tempfile
from pathlib import Path

PROTO_PACKAGE_DIRECTORY = Path(__file__).resolve().parent.parent / "src/bolide/proxy/proto"
SDK_DISTRIBUTION = "rocketmq-python-client"
SDK_VERSION = "5.1.2"
"""The SDK release whose descriptors the proxy serves; the tests drive the same release."""
SDK_MODULE_DIRECTORY = "rocketmq/grpc_protocol"
PROTO_NAMES = ("definition", "service", "admin")
"""In dependency order: service.proto and admin.proto import definition.proto."""
GENERATED_HEADER = (
    f"# Generated during the install by tools/generate_proto.py from the descriptors of\n"
    f"# {SDK_DISTRIBUTION} {SDK_VERSION} (apache/rocketmq-clients, Apache License 2.0).\n"
)


def sdk_serialized_descriptors() -> dict[str, bytes]:
    """``{"definition.proto": bytes, ...}``: each SDK module's serialized FileDescriptorProto,
    read from the installed distribution's source files. Raises SystemExit when the SDK is
    not installed, is another version, or a module holds no descriptor."""
    try:
        distribution = importlib.metadata.distribution(SDK_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(
            f"{SDK_DISTRIBUTION}=={SDK_VERSION} is not installed: it is a build requirement "
            "(pyproject.toml [build-system]); the 5.x protocol modules come from it"
        ) from None
    if distribution.version != SDK_VERSION:
        raise SystemExit(
            f"{SDK_DISTRIBUTION} {distribution.version} is installed; the proxy's protocol "
            f"is taken from {SDK_VERSION}"
        )
    descriptors: dict[str, bytes] = {}
    for name in PROTO_NAMES:
        source = Path(str(distribution.locate_file(f"{SDK_MODULE_DIRECTORY}/{name}_pb2.py")))
        descriptors[f"{name}.proto"] = _serialized_descriptor(source)
    return descriptors


def _serialized_descriptor(source: Path) -> bytes:
    """The bytes literal passed to ``AddSerializedFile`` in a protoc-generated module."""
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, bytes)
        ):
            return node.args[0].value
    raise SystemExit(f"{source}: no serialized descriptor (AddSerializedFile) found")


def _descriptor_set(descriptors: dict[str, bytes]) -> bytes:
    """A FileDescriptorSet holding the SDK's files and the well-known types they import."""
    from google.protobuf import descriptor_pb2, duration_pb2, timestamp_pb2

    file_set = descriptor_pb2.FileDescriptorSet()
    for dependency in (duration_pb2, timestamp_pb2):
        file_set.file.add().ParseFromString(dependency.DESCRIPTOR.serialized_pb)
    for serialized in descriptors.values():
        file_set.file.add().ParseFromString(serialized)
    return file_set.SerializeToString()


def generate() -> dict[str, str]:
    """``{file name: text}`` of every module and stub protoc writes for the SDK's descriptors."""
    from grpc_tools import protoc

    descriptors = sdk_serialized_descriptors()
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        descriptor_set = out / "rocketmq-v2.desc"
        descriptor_set.write_bytes(_descriptor_set(descriptors))
        generated = out / "generated"
        generated.mkdir()
        arguments = [
            "protoc",
            f"--descriptor_set_in={descriptor_set}",
            f"--python_out={generated}",
            f"--pyi_out={generated}",
            *descriptors,
        ]
        if protoc.main(arguments) != 0:
            raise SystemExit("protoc failed on the SDK's descriptors")
        files: dict[str, str] = {}
        for path in sorted(generated.iterdir()):
            text = path.read_text(encoding="utf-8")
            text = re.sub(r"(?m)^import definition_pb2 as", "from . import definition_pb2 as", text)
            files[path.name] = GENERATED_HEADER + text
    return files


def write(directory: Path = PROTO_PACKAGE_DIRECTORY) -> list[Path]:
    """Writes the generated files into ``directory``; returns their paths."""
    written = []
    for name, text in generate().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main() -> int:
    if "--check" in sys.argv[1:]:
        differing = [
            name
            for name, text in generate().items()
            if not (PROTO_PACKAGE_DIRECTORY / name).exists()
            or (PROTO_PACKAGE_DIRECTORY / name).read_text(encoding="utf-8") != text
        ]
        for name in differing:
            print(f"{name}: differs from what protoc generates", file=sys.stderr)
        return 1 if differing else 0
    written = write()
    print(f"wrote {len(written)} files to {PROTO_PACKAGE_DIRECTORY}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
