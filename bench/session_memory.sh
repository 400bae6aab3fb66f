#!/usr/bin/env bash
# Session memory on a 10-year synthetic memory (3,650 daily files x 20 notes):
# cold index build, warm per-command wall time (median), needle checks.
#
#   bench/session_memory.sh [DAYS]        (default 3650)
#
# Needs ../shared/bench/gen_memory.py (or GEN_MEMORY=path/to/gen_memory.py),
# hyperfine and python3.
source "$(dirname "$0")/lib.sh"
need_hyperfine
DAYS="${1:-3650}"
GEN="$(memory_generator)"
build_release

home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
export HOME="$home" TZ=UTC
ws="$home/.almanac/workspace"
python3 "$GEN" --out "$ws" --days "$DAYS" >/dev/null
index_dir="$home/.almanac/index"
A="$ALMANAC"

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
