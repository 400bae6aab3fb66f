#!/usr/bin/env bash
# Start-up cost of the binary: `almanac --version`, `almanac status`,
# every `session-memory` command, `memory search` and `skills list`
# (release build, a small temporary home): the median time of >= 150 runs,
# then each command's minor page faults and peak memory (median of 10
# runs), then the guard on `--version`'s page faults.
#
#   bench/startup.sh
#   BASELINE_BIN=/path/to/other/almanac bench/startup.sh
#
# With BASELINE_BIN both builds are timed in one run, in alternating
# rounds (ROUNDS=3, each of RUNS=50 runs per build), each build in a home
# of its own (one build's index is not the other's), side by side with
# the ratio of the medians.
source "$(dirname "$0")/lib.sh"
need_hyperfine
build_release
ROUNDS="${ROUNDS:-3}"
RUNS="${RUNS:-50}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Both builds run copies side by side: where a file lives (a hard link in
# target/, another file system) changes the cost of starting it by more
# than the difference being measured.
cp "$ALMANAC" "$work/almanac"
builds=("$work/almanac")
if [ -n "${BASELINE_BIN:-}" ]; then
    cp "$BASELINE_BIN" "$work/baseline"
    builds+=("$work/baseline")
fi

# A realistic state (small_home); the index is built by each build's
# first run.
seed="$work/seed"
small_home "$seed"
for bin in "${builds[@]}"; do
    cp -a "$seed" "$bin.home"
    # `clear` in a home of its own (it empties the memory the others read):
    # after its first run it clears an empty memory, as a script repeating
    # it would.
    mkdir -p "$bin.clear/.almanac/workspace/memory"
done

# timed NAME [--clear] ARGS…: every build runs `almanac ARGS…` in its own
# home, ROUNDS alternating rounds of RUNS runs; prints the medians.
timed() {
    local name="$1" suffix=home
    shift
    if [ "$1" = "--clear" ]; then suffix=clear; shift; fi
    local round bin i=0
    for round in $(seq "$ROUNDS"); do
        for bin in "${builds[@]}"; do
            HOME="$bin.$suffix" hyperfine --style none --shell=none --warmup 5 --runs "$RUNS" \
                --export-json "$work/t-$i.json" "$bin $*" >/dev/null 2>&1
            i=$((i + 1))
        done
    done
    python3 - "$name" "$work" "${#builds[@]}" "$i" <<'PY'
import json, statistics, sys
name, work, nbuilds, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
times = [[] for _ in range(nbuilds)]
for i in range(files):
    times[i % nbuilds] += json.load(open(f"{work}/t-{i}.json"))["results"][0]["times"]
medians = []
for label, ts in zip([name, "  baseline"], times):
    ms = [t * 1000 for t in ts]
    medians.append(statistics.median(ms))
    print(f"{label:<34} median {medians[-1]:7.2f} ms   mean {statistics.mean(ms):7.2f} ms   min {min(ms):7.2f} ms")
if nbuilds == 2:
    print(f"{'  this build / baseline':<34} {medians[0] / medians[1]:.2f}x")
PY
}

echo "almanac start-up (release, $(nproc) cores, $ROUNDS x $RUNS runs per build)"
hyperfine_median "true (process floor)" "true"
timed "almanac --version" --version
timed "almanac status" status
timed "almanac status --json" status --json
timed "session-memory search" session-memory search tea
timed "session-memory context" session-memory context plan the morning
timed "session-memory status" session-memory status
timed "session-memory append" session-memory append a note from the start-up bench
timed "session-memory clear" --clear session-memory clear --scope daily
timed "memory search" memory search tea
timed "skills list" skills list

# faults NAME ARGS…: minor page faults and peak resident memory of one
# run of each build in its home, the median of 10 runs.
faults() {
    local name="$1"
    shift
    local bin label
    for bin in "${builds[@]}"; do
        label="$name"
        [ "$bin" = "$work/baseline" ] && label="  baseline"
        for _ in $(seq 10); do
            HOME="$bin.home" /usr/bin/time -f "%R %M" "$bin" "$@" 2>&1 >/dev/null | tail -n 1
        done | sort -n | awk -v l="$label" 'NR == 5 {printf "%-34s page faults %6d   peak %6.1f MB\n", l, $1, $2 / 1024}'
    done
}
echo "page faults and peak memory (median of 10 runs)"
faults "almanac --version" --version
faults "almanac status" status
faults "session-memory search" session-memory search tea
faults "session-memory context" session-memory context plan the morning
faults "session-memory status" session-memory status
faults "session-memory append" session-memory append a note from the start-up bench
faults "memory search" memory search tea
faults "skills list" skills list

# How much of the start-up code the linker found to gather (build.rs):
# names from another compiler or dependency version are not found; rerun
# scripts/startup-symbols then.
listed="$BENCH_ROOT/scripts/startup-symbols.txt"
if [ -f "$listed" ] && command -v nm >/dev/null 2>&1; then
    found="$(nm --defined-only "$ALMANAC" | awk '{print $3}' | sort -u | comm -12 - <(sort -u "$listed") | wc -l)"
    total="$(wc -l <"$listed")"
    echo "start-up functions gathered: $found of $total listed in scripts/startup-symbols.txt"
    # Code changes rename some generic copies; start-up pays for each
    # function no longer gathered (a tenth missing cost ~10% here).
    if [ $((found * 100)) -lt $((total * 97)) ]; then
        echo "warning: the list is stale; run scripts/startup-symbols and commit it" >&2
    fi
fi

# The guard: `--version`'s minor page faults may not grow by more than
# 20% over the figure recorded in bench/version_faults.txt (a release
# build on Linux); lower it there when start-up gets cheaper.
recorded="$(tr -dc '0-9' <"$BENCH_ROOT/bench/version_faults.txt")"
measured="$(for _ in $(seq 10); do /usr/bin/time -f "%R" "$ALMANAC" --version 2>&1 >/dev/null | tail -n 1; done | sort -n | sed -n 5p)"
limit=$((recorded * 120 / 100))
if [ "$measured" -gt "$limit" ]; then
    echo "FAIL: almanac --version takes $measured page faults, over $limit (recorded $recorded + 20%)" >&2
    exit 1
fi
echo "almanac --version page faults $measured, within $limit (recorded $recorded + 20%)"
