#!/usr/bin/env bash
# One entry point for the README's quick start: creates (and reuses) .venv, then
#   scripts/dev.sh demo [ARGS...]   runs the demo
#   scripts/dev.sh test [ARGS...]   runs the whole test suite (ARGS go to pytest)
# It needs Python 3.11+ (python3, or $PYTHON) and pip.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
python=${PYTHON:-python3}
extras="dev,onnx,opencl,jit,ray,docs,llm"
stamp="$venv/.halfway-installed"
want=$(sha256sum < "$root/pyproject.toml" | cut -c1-16)-$extras

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "scripts/dev.sh: needs Python 3.11 or newer as $python (set PYTHON=...)" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    # without ensurepip (Debian's python3 without python3-venv) the venv gets pip from outside
    "$python" -m venv "$venv" 2>/dev/null || "$python" -m venv --without-pip "$venv"
fi
pip() {
    if "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        "$venv/bin/python" -m pip "$@"
    else
        "$python" -m pip --python "$venv/bin/python" "$@"
    fi
}
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    pip install -q --upgrade pip
    pip install -q -e "$root[$extras]"
    echo "$want" > "$stamp"
fi

cmd=${1:-}
shift || true
case "$cmd" in
    demo) exec "$venv/bin/python" -m halfway demo "$@" ;;
    test) cd "$root" && exec "$venv/bin/python" -m pytest "$@" ;;
    *) echo "usage: scripts/dev.sh demo|test [ARGS...]" >&2; exit 2 ;;
esac
