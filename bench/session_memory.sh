#!/usr/bin/env bash
# Session memory on a 10-year synthetic memory (3,650 daily files x 20 notes):
# cold index build, warm per-command wall time (median), needle checks, and
# how search and append cost after 3,200 appends to one day's file.
#
#   bench/session_memory.sh [DAYS] [CASE]   (default 3650, CASE all | growth)
#
# Needs ../shared/bench/gen_memory.py (or GEN_MEMORY=path/to/gen_memory.py),
# hyperfine and python3.
source "$(dirname "$0")/lib.sh"
need_hyperfine
DAYS="${1:-3650}"
CASE="${2:-all}"
GEN="$(memory_generator)"
build_release

home="$(mktemp -d)"
trap 'rm -rf "$home" "${growth_home:-}"' EXIT
export HOME="$home" TZ=UTC
ws="$home/.almanac/workspace"
python3 "$GEN" --out "$ws" --days "$DAYS" >/dev/null
index_dir="$home/.almanac/index"
A="$ALMANAC"

# figure NAME: "median_ms cpu_ms" of the last hyperfine_median run named
# NAME (cpu: mean user + system time, steadier than wall time on a busy
# machine).
figure() {
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"][0]; print(r["median"] * 1000, (r["user"] + r["system"]) * 1000)' \
        "$BENCH_OUT/$1.json"
}

# Growth: search and append on the fresh memory, then after 3,200 real
# `session-memory append` calls into today's file (the note the "append"
# line above appends; its own copy of the memory and state). Neither may
# cost more than the fresh figure plus 10%. Queries: words of no appended
# note, the appended note's words (its 3,200 copies are one text), and
# very common words.
growth_case() {
    local g
    g="$(mktemp -d)"
    growth_home="$g"
    mkdir -p "$g/.almanac"
    cp -r "$ws" "$g/.almanac/workspace"
    (
        export HOME="$g" ALMANAC_NOW=2026-11-29T09:00:00+00:00
        local note="Benchmark note about the quarterly review"
        local -a names=("search" "search appended" "common words" "append")
        local -a cmds=(
            "$A session-memory search storage unit gate code"
            "$A session-memory search quarterly review"
            "$A session-memory search Alice booked the flight with the team"
            "$A session-memory append $note"
        )
        "$A" session-memory search warmup >/dev/null
        "$A" session-memory append "$note" >/dev/null
        local i
        for i in "${!names[@]}"; do
            hyperfine_median "growth: ${names[$i]} (fresh)" "${cmds[$i]}"
        done
        local started=$SECONDS day="$g/.almanac/workspace/memory/2026-11-29.md"
        local before
        before=$(wc -l <"$day")
        for _ in $(seq 3200); do
            "$A" session-memory append "$note" >/dev/null
        done
        echo "3,200 appends to memory/2026-11-29.md took $((SECONDS - started)) s ($before -> $(wc -l <"$day") lines)"
        for i in "${!names[@]}"; do
            hyperfine_median "growth: ${names[$i]} (3,200 appends)" "${cmds[$i]}"
        done
        for i in "${!names[@]}"; do
            python3 - "${names[$i]}" $(figure "growth: ${names[$i]} (fresh)") \
                $(figure "growth: ${names[$i]} (3,200 appends)") <<'PY'
import sys
what = sys.argv[1]
fresh, fresh_cpu, grown, grown_cpu = map(float, sys.argv[2:6])
verdict = "ok" if grown <= fresh * 1.10 else "OVER 10%"
print(f"growth: {what:<16} fresh {fresh:6.2f} ms  after 3,200 appends {grown:6.2f} ms  ratio {grown / fresh:.2f} {verdict:<9}"
      f"(cpu {fresh_cpu:.2f} -> {grown_cpu:.2f} ms, {grown_cpu / fresh_cpu:.2f})")
PY
        done
    )
    rm -rf "$g"
}

if [ "$CASE" = growth ]; then
    growth_case
    exit 0
fi

echo "session memory, $DAYS days ($(find "$ws/memory" -name '*.md' | wc -l) daily files, $(cat "$ws"/memory/*.md | grep -c '^- \[') notes), release, $(nproc) cores"

# Cold: no index at all; the first search builds it.
BENCH_RUNS=10 hyperfine_median "cold index build + search" \
    --prepare "rm -rf $index_dir" "$A session-memory search Zephyrine"
"$A" session-memory search warmup >/dev/null

# Warm: index present and up to date.
hyperfine_median "search (warm)" "$A session-memory search storage unit gate code"
hyperfine_median "context (warm)" "$A session-memory context plan my morning routine"
hyperfine_median "status" "$A session-memory status"
hyperfine_median "append" "$A session-memory append Benchmark note about the quarterly review"
hyperfine_median "search after append" "$A session-memory search quarterly review"
hyperfine_median "heartbeat ping" "$A heartbeat ping bench.tick"

# Correctness on the same memory.
python3 - "$A" "$ws" <<'PY'
import json, subprocess, sys
almanac, ws = sys.argv[1], sys.argv[2]
needles = json.load(open(f"{ws}/needles.json"))
def search(q, k=5):
    out = subprocess.run([almanac, "session-memory", "search", "--json", "--limit", str(k), "--", q],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["results"]
first = 0
for n in needles:
    hits = search(n["query"])
    ok = bool(hits) and hits[0]["path"] == n["path"] and hits[0]["startLine"] == n["line"]
    first += ok
    print(f"  needle {n['query']!r:40} first hit: {'yes' if ok else 'NO'} ({n['path']}:{n['line']})")
print(f"needles first: {first}/{len(needles)}")
oldest = sorted(needles, key=lambda n: n["path"])[0]
print(f"oldest needle ({oldest['path']}) found: {'yes' if any(h['path'] == oldest['path'] for h in search(oldest['query'], 10)) else 'NO'}")
subprocess.run([almanac, "session-memory", "append", "Freshly appended saffron kumquat note"], check=True, capture_output=True)
hits = search("saffron kumquat")
print(f"search right after append sees the note: {'yes' if hits and 'saffron kumquat' in hits[0]['snippet'] else 'NO'}")
PY

growth_case
