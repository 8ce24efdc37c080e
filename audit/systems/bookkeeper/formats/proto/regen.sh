#!/usr/bin/env bash
# Regenerate the committed *_pb2.py next to the .proto files (or into $1).
# Usage: audit/systems/bookkeeper/formats/proto/regen.sh [OUT_DIR]
# PYTHON selects the interpreter (default: the repo's .venv); grpcio-tools must be
# the pinned version, otherwise the output (and its runtime check) differs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../../.." && pwd)"
out="${1:-$here}"
python="${PYTHON:-$repo/.venv/bin/python}"
cd "$here"
"$python" -m grpc_tools.protoc -I. --python_out="$out" DataFormats.proto BookkeeperProtocol.proto
