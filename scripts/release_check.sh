#!/usr/bin/env bash
# What the release workflow does, runnable from a checkout: build the sdist and the wheel (the
# wheel from the sdist, so both are complete), `twine check` them, install the wheel alone in a
# clean virtual environment, check that its package data arrived, and run the demo from there.
#   scripts/release_check.sh [DIST]    DIST: where the built files go (default: dist/)
# It needs Python 3.11+ (python3, or $PYTHON), pip and the package index.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
dist=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

venv() {  # a fresh environment at $1 with an up-to-date pip
    "$python" -m venv "$1"
    "$1/bin/python" -m pip install -q --upgrade pip
}

echo "== build: sdist, then the wheel from it, into $dist"
venv "$work/tools"
"$work/tools/bin/python" -m pip install -q "build>=1.2" "twine>=5.0"
rm -f "$dist"/halfway-*
"$work/tools/bin/python" -m build --outdir "$dist" "$root"
"$work/tools/bin/python" -m twine check --strict "$dist"/halfway-*

echo "== install the wheel in a clean environment"
venv "$work/clean"
"$work/clean/bin/python" -m pip install -q "$dist"/halfway-*.whl
cd "$work"  # away from the checkout: what runs is the installed package
"$work/clean/bin/python" "$root/scripts/check_package_data.py" "$root"
"$work/clean/bin/halfway" --version
"$work/clean/bin/halfway" graph "$("$work/clean/bin/python" -c \
    'from importlib.resources import files; print(files("halfway.api") / "data" / "demo_bert.onnx")')" -o "$work/graph.html"

echo "== the demo, from the installed wheel"
"$work/clean/bin/halfway" demo --samples 1 --warmup 1
echo "== release check passed: $(cd "$dist" && ls halfway-*)"
