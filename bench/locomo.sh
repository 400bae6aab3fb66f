#!/usr/bin/env bash
# Memory search quality on LoCoMo (categories 1-4): the shared harness
# writes each conversation as daily notes, asks every question through
# `almanac memory search --json` and scores the hits against the gold
# evidence. Prints the harness's table for almanac and its BM25 baseline.
#
#   bench/locomo.sh [extra harness args, e.g. --details out.jsonl]
#
# Needs ../shared/eval/locomo_retrieval.py and ../shared/data/locomo-dev.json
# (or LOCOMO_EVAL / LOCOMO_DATA) and python3.
source "$(dirname "$0")/lib.sh"
EVAL="${LOCOMO_EVAL:-$BENCH_ROOT/../shared/eval/locomo_retrieval.py}"
DATA="${LOCOMO_DATA:-$BENCH_ROOT/../shared/data/locomo-dev.json}"
[ -f "$EVAL" ] || { echo "harness not found: $EVAL (set LOCOMO_EVAL)" >&2; exit 1; }
[ -f "$DATA" ] || { echo "data not found: $DATA (set LOCOMO_DATA)" >&2; exit 1; }
build_release

state="$(mktemp -d)"
trap 'rm -rf "$state"' EXIT
export ALMANAC_STATE_DIR="$state" TZ=UTC
python3 "$EVAL" run --data "$DATA" --categories 1 2 3 4 --baseline bm25 \
    --name almanac \
    --index-cmd "$ALMANAC --workspace {ws} memory index" \
    --search-cmd "$ALMANAC --workspace {ws} --now {now} memory search --json --max-results {k} -- {query}" \
    "$@"
