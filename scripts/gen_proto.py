"""Regenerate proto/framework_pb2.py from proto/framework.proto (needs grpcio-tools, the dev extra).

    python scripts/gen_proto.py          # rewrite the checked-in module
    python scripts/gen_proto.py --check  # exit 1 if the checked-in module is stale
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

PROTO_DIR = Path(__file__).resolve().parent.parent / "proto"


def generate(out_dir: Path) -> Path:
    """Run protoc on framework.proto, writing framework_pb2.py into ``out_dir``."""
    rc = protoc.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}", str(PROTO_DIR / "framework.proto")])
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")
    return out_dir / "framework_pb2.py"


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp)).read_text()
    target = PROTO_DIR / "framework_pb2.py"
    if "--check" in argv:
        if target.read_text() != fresh:
            print(f"{target} is stale: run python scripts/gen_proto.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(fresh)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
