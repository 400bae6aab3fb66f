#!/usr/bin/env bash
# Memory search and recall on a 10-year synthetic memory (3,650 daily files
# x 20 notes): cold index, no-op syncs, per-command medians, and checks
# (needles first, time ranges, the planted entity, a deleted index).
#
#   bench/memory_search.sh [DAYS]        (default 3650)
#
# Needs ../shared/bench/gen_memory.py (or GEN_MEMORY=path), hyperfine, python3.
source "$(dirname "$0")/lib.sh"
need_hyperfine
DAYS="${1:-3650}"
GEN="$(memory_generator)"
build_release

home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
export HOME="$home" TZ=UTC ALMANAC_NOW=2026-11-29T09:00:00+00:00
ws="$home/.almanac/workspace"
python3 "$GEN" --out "$ws" --days "$DAYS" >/dev/null
index_dir="$home/.almanac/index"
A="$ALMANAC"

echo "memory search, $DAYS days ($(find "$ws/memory" -name '*.md' | wc -l) daily files), release, $(nproc) cores"
BENCH_RUNS=5 hyperfine_median "cold index (memory index)" \
    --prepare "rm -rf $index_dir" "$A memory index"
"$A" memory index >/dev/null
hyperfine_median "no-op full sync (memory index)" "$A memory index"
hyperfine_median "search, quick no-op sync included" "$A memory search --json Zephyrine Labs badge number"
hyperfine_median "search with a time phrase" "$A memory search --json dentist in March 2024"
hyperfine_median "search, 20 results" "$A memory search --json -n 20 Alice booked the flight with the team"
hyperfine_median "entity (planted)" "$A memory entity --json Zephyrine Labs"
hyperfine_median "entity (7,000 mentions)" "$A memory entity --json Alice"
hyperfine_median "recall" "$A memory recall --json --budget 300 storage unit gate code"
hyperfine_median "status" "$A memory status --json"

python3 - "$A" "$ws" "$index_dir" <<'PY'
import json, shutil, subprocess, sys, time
almanac, ws, index_dir = sys.argv[1:4]
def run(*args):
    return json.loads(subprocess.run([almanac, "memory", *args], capture_output=True, text=True, check=True).stdout)
internal = [run("index", "--json")["elapsedMs"] for _ in range(5)]
print(f"no-op full sync, inside the process: median {sorted(internal)[2]:.1f} ms (stat of every file)")
needles = json.load(open(f"{ws}/needles.json"))
first = sum(1 for n in needles
            if (r := run("search", "--json", n["query"])["results"]) and r[0]["path"] == n["path"] and r[0]["startLine"] == n["line"])
print(f"needles first: {first}/{len(needles)}")
hits = run("search", "--json", "-n", "50", "dentist in March 2024")["results"]
inside = all("2024-03-01" <= h["date"] <= "2024-03-31" for h in hits)
print(f"'dentist in March 2024': {len(hits)} hits, all from March 2024: {'yes' if hits and inside else 'NO'}")
hits = run("search", "--json", "-n", "50", "--since", "2025-06-01", "--until", "2025-06-07", "standup")["results"]
inside = all("2025-06-01" <= h["date"] <= "2025-06-07" for h in hits)
print(f"--since 2025-06-01 --until 2025-06-07: {len(hits)} hits, all in range: {'yes' if hits and inside else 'NO'}")
planted = needles[0]
e = run("entity", "--json", "Zephyrine Labs")
day = planted["path"][len("memory/"):-len(".md")]
ok = e["mentions"] == 1 and e["firstSeen"] == day and e["lines"][0]["text"] == planted["text"]
print(f"entity 'Zephyrine Labs': {e['mentions']} mention, seen {e['firstSeen']}, summary right: {'yes' if ok else 'NO'}")
e = run("entity", "--json", "Alice")
print(f"entity 'Alice': {e['mentions']} mentions in {e['files']} files, {e['firstSeen']} .. {e['lastSeen']}")
queries = ["Zephyrine Labs badge number", "dentist in March 2024", "牙医 预约", "Alice booked the flight"]
before = [run("search", "--json", "-n", "10", q) for q in queries]
shutil.rmtree(index_dir)
t = time.time()
after = [run("search", "--json", "-n", "10", q) for q in queries]
print(f"deleted index, rebuilt on the next search ({(time.time() - t) * 1000:.0f} ms for {len(queries)} searches): same results: {'yes' if before == after else 'NO'}")
PY
