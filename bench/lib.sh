# Shared helpers for the benchmark scripts. Source it, do not run it.
set -euo pipefail

BENCH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# ALMANAC_BIN=path runs the figures on another build (nothing is built);
# BASELINE_BIN=path also times each start-up command on that build, in the
# same run, and prints the ratio.
ALMANAC="${ALMANAC_BIN:-$BENCH_ROOT/target/release/almanac}"
BENCH_OUT="$BENCH_ROOT/bench/out"
mkdir -p "$BENCH_OUT"

build_release() {
    [ -n "${ALMANAC_BIN:-}" ] && return 0
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

# small_home DIR: the home the start-up figures are taken in: a config
# file and a workspace with MEMORY.md and 28 daily notes (the index is
# built by the first command run in it).
small_home() {
    local home="$1" d
    mkdir -p "$home/.almanac/workspace/memory"
    printf '{agents: {defaults: {userTimezone: "UTC"}}}\n' >"$home/.almanac/config.json5"
    printf '# Long-term memory\n\n- prefers tea\n' >"$home/.almanac/workspace/MEMORY.md"
    for d in $(seq -w 1 28); do
        printf -- '- [2026-11-%s 09:00] note\n' "$d" >"$home/.almanac/workspace/memory/2026-11-$d.md"
    done
}

need_hyperfine() {
    if ! command -v hyperfine >/dev/null 2>&1; then
        echo "hyperfine is required (apt-get install hyperfine)" >&2
        exit 1
    fi
}

# hyperfine_median NAME [HYPERFINE OPTIONS…] CMD: times CMD and prints
# "NAME  median  mean  min" in ms. With BASELINE_BIN, CMD is also timed
# with that binary in place of $ALMANAC and both lines are printed with
# the ratio of the medians.
hyperfine_median() {
    local name="$1"
    shift
    local json="$BENCH_OUT/$name.json"
    local options=("${@:1:$#-1}")
    local cmd="${!#}"
    local cmds=("$cmd")
    if [ -n "${BASELINE_BIN:-}" ] && [[ "$cmd" == *"$ALMANAC"* ]]; then
        # Both binaries are timed from copies side by side: where a file
        # lives (a hard link in target/, another file system) changes the
        # cost of starting it by more than the difference being measured.
        local pair="$BENCH_OUT/compare"
        if [ -z "${COMPARE_READY:-}" ]; then
            COMPARE_READY=1
            mkdir -p "$pair"
            cp "$ALMANAC" "$pair/almanac"
            cp "$BASELINE_BIN" "$pair/baseline"
        fi
        cmds=("${cmd//$ALMANAC/$pair/almanac}" "${cmd//$ALMANAC/$pair/baseline}")
    fi
    hyperfine --style none --shell=none --warmup 5 --min-runs "${BENCH_RUNS:-50}" \
        --export-json "$json" "${options[@]}" "${cmds[@]}" >/dev/null 2>&1
    python3 - "$name" "$json" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
results = json.load(open(path))["results"]
ms = lambda s: s * 1000
for label, r in zip([name, "  baseline"], results):
    print(f"{label:<34} median {ms(r['median']):7.2f} ms   mean {ms(r['mean']):7.2f} ms   min {ms(r['min']):7.2f} ms")
if len(results) == 2:
    print(f"{'  this build / baseline':<34} {results[0]['median'] / results[1]['median']:.2f}x")
PY
}

# in_rounds LABEL=REGEX… -- "$0" ARGS…: runs the calling script ROUNDS
# times (default 3; its rounds run with ROUNDS=1), prints each round's
# output, then the median over the rounds of each figure: the first
# number REGEX captures in a round's output, under LABEL. On a shared
# machine one round's figure moves by 15% run to run; the median of three
# moves less. Returns 1 when the caller is a round itself (it goes on).
in_rounds() {
    local rounds="${ROUNDS:-3}" figures=() r
    [ "$rounds" -le 1 ] && return 1
    while [ "$1" != "--" ]; do figures+=("$1"); shift; done
    shift
    build_release
    local outputs="$BENCH_OUT/rounds.$$"
    : >"$outputs"
    for r in $(seq "$rounds"); do
        echo "== round $r of $rounds"
        # (set -e does not reach here: the caller tests this function.)
        ROUNDS=1 ALMANAC_BIN="$ALMANAC" "$@" | tee -a "$outputs" ||
            { echo "round $r failed" >&2; rm -f "$outputs"; exit 1; }
        echo "== end of round" >>"$outputs"
    done
    python3 - "$outputs" "${figures[@]}" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
rounds = text.split("== end of round")[:-1]
print(f"== median of {len(rounds)} rounds")
for figure in sys.argv[2:]:
    label, regex = figure.split("=", 1)
    values = [float(m.group(1)) for r in rounds if (m := re.search(regex, r))]
    if values:
        shown = ", ".join(f"{v:g}" for v in values)
        print(f"{label}: {statistics.median(values):g} (rounds: {shown})")
PY
    rm -f "$outputs"
    return 0
}
