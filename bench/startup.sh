#!/usr/bin/env bash
# Start-up cost of the binary: `almanac --version`, `almanac status`,
# every `session-memory` command, `memory search` and `skills list`
# (release build, a small temporary home, median of >= 50 runs), then
# each command's minor page faults and peak memory (median of 10 runs).
# With BASELINE_BIN both builds are timed in one run, side by side.
source "$(dirname "$0")/lib.sh"
need_hyperfine
build_release

home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
export HOME="$home"
# A realistic state: a config file, a workspace with memory files, a store.
"$ALMANAC" config set agents.defaults.userTimezone UTC >/dev/null
mkdir -p "$home/.almanac/workspace/memory"
printf '# Long-term memory\n\n- prefers tea\n' >"$home/.almanac/workspace/MEMORY.md"
for d in $(seq -w 1 28); do printf -- '- [2026-11-%s 09:00] note\n' "$d" >"$home/.almanac/workspace/memory/2026-11-$d.md"; done

echo "almanac start-up (release, $(nproc) cores)"
hyperfine_median "true (process floor)" "true"
hyperfine_median "almanac --version" "$ALMANAC --version"
hyperfine_median "almanac status" "$ALMANAC status"
hyperfine_median "almanac status --json" "$ALMANAC status --json"
hyperfine_median "session-memory search" "$ALMANAC session-memory search tea"
hyperfine_median "session-memory context" "$ALMANAC session-memory context plan the morning"
hyperfine_median "session-memory status" "$ALMANAC session-memory status"
hyperfine_median "session-memory append" "$ALMANAC session-memory append a note from the start-up bench"
hyperfine_median "memory search" "$ALMANAC memory search tea"
hyperfine_median "skills list" "$ALMANAC skills list"
# `clear` in a home of its own (it empties the memory the others read):
# after its first run it clears an empty memory, as a script repeating
# it would.
clear_home="$(mktemp -d)"
trap 'rm -rf "$home" "$clear_home"' EXIT
mkdir -p "$clear_home/.almanac/workspace/memory"
HOME="$clear_home" hyperfine_median "session-memory clear" "$ALMANAC session-memory clear --scope daily"

# faults NAME ARGS…: minor page faults and peak resident memory of one
# run of this build (and of BASELINE_BIN), the median of 10 runs.
faults() {
    local name="$1"
    shift
    local bin label
    for bin in "$ALMANAC" ${BASELINE_BIN:+"$BASELINE_BIN"}; do
        label="$name"
        [ "$bin" = "${BASELINE_BIN:-}" ] && label="  baseline"
        for _ in $(seq 10); do
            /usr/bin/time -f "%R %M" "$bin" "$@" 2>&1 >/dev/null | tail -n 1
        done | sort -n | awk -v l="$label" 'NR == 5 {printf "%-34s page faults %6d   peak %6.1f MB\n", l, $1, $2 / 1024}'
    done
}
echo "page faults and peak memory (median of 10 runs)"
faults "almanac --version" --version
faults "almanac status" status
faults "session-memory search" session-memory search tea
faults "session-memory context" session-memory context plan the morning
faults "session-memory status" session-memory status
faults "memory search" memory search tea
faults "skills list" skills list

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
