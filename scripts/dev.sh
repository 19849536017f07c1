#!/usr/bin/env bash
# One entry point for the README's quick start: creates (and reuses) .venv, then
#   scripts/dev.sh demo [ARGS...]   runs the demo
#   scripts/dev.sh test [ARGS...]   runs the whole test suite
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
extras="dev,onnx,opencl,jit"
stamp="$venv/.halfway-installed"
want=$(cat "$root/pyproject.toml" | sha256sum | cut -c1-16)-$extras

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -e "$root[$extras]"
    echo "$want" > "$stamp"
fi

cmd=${1:-}
shift || true
case "$cmd" in
    demo) exec "$venv/bin/halfway" demo "$@" ;;
    test) cd "$root" && exec "$venv/bin/python" -m pytest "$@" ;;
    *) echo "usage: scripts/dev.sh demo|test [ARGS...]" >&2; exit 2 ;;
esac
