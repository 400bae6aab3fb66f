#!/usr/bin/env bash
# Start-up cost of the binary: `almanac --version` and `almanac status`
# (release build, fresh temporary home, median of >= 50 runs).
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
