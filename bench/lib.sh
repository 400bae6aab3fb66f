# Shared helpers for the benchmark scripts. Source it, do not run it.
set -euo pipefail

BENCH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALMANAC="$BENCH_ROOT/target/release/almanac"
BENCH_OUT="$BENCH_ROOT/bench/out"
mkdir -p "$BENCH_OUT"

build_release() {
    echo "building almanac in release mode..." >&2
    (cd "$BENCH_ROOT" && cargo build --release --quiet --bin almanac)
}

# memory_generator: the path of gen_memory.py (GEN_MEMORY overrides it);
# stops the script when it is missing.
memory_generator() {
    local gen="${GEN_MEMORY:-$BENCH_ROOT/../shared/bench/gen_memory.py}"
    [ -f "$gen" ] || { echo "memory generator not found: $gen (set GEN_MEMORY)" >&2; exit 1; }
    echo "$gen"
}

need_hyperfine() {
    if ! command -v hyperfine >/dev/null 2>&1; then
        echo "hyperfine is required (apt-get install hyperfine)" >&2
        exit 1
    fi
}

# hyperfine_median NAME CMD...: times CMD and prints "NAME  median  mean  min" in ms.
hyperfine_median() {
    local name="$1"
    shift
    local json="$BENCH_OUT/$name.json"
    hyperfine --style none --shell=none --warmup 5 --min-runs "${BENCH_RUNS:-50}" \
        --export-json "$json" "$@" >/dev/null 2>&1
    python3 - "$name" "$json" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
r = json.load(open(path))["results"][0]
ms = lambda s: s * 1000
print(f"{name:<34} median {ms(r['median']):7.2f} ms   mean {ms(r['mean']):7.2f} ms   min {ms(r['min']):7.2f} ms")
PY
}
