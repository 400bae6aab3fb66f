#!/usr/bin/env bash
# Cron jobs at scale: a job store of COUNT jobs (about 400 bytes each, as
# OpenClaw writes them: cron, every and at schedules, one in ten
# disabled, runtime state filled in). Reports the first `cron list` (the
# index built from the file), then `cron list --json --limit 200`, `cron
# list --query`, `cron status --json` and `cron list` after a change
# through the commands; then the commands that change one job (`cron
# edit`, `disable`, `enable`, `add`, `rm`), each the median of RUNS runs
# (each run a real change: a new name, the switch flipped, a job added
# and that job removed).
#
#   bench/cron.sh [COUNT]     (default 100000; RUNS=15)
source "$(dirname "$0")/lib.sh"
need_hyperfine
COUNT="${1:-100000}"
build_release

home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
export HOME="$home"
mkdir -p "$home/.almanac/cron"
python3 - "$home/.almanac/cron/jobs.json" "$COUNT" <<'PY'
import json, sys, uuid, random
path, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
now = 1796119200000
zones = ["Europe/Paris", "America/New_York", "Asia/Tokyo", "UTC"]
jobs = []
for i in range(n):
    kind = i % 3
    if kind == 0:
        schedule = {"kind": "cron", "expr": f"{i % 60} {i % 24} * * *", "tz": zones[i % 4]}
    elif kind == 1:
        schedule = {"kind": "every", "everyMs": 60000 * (1 + i % 240), "anchorMs": now - i * 1000}
    else:
        schedule = {"kind": "at", "at": "2027-01-01T09:00:00.000Z"}
    main = i % 2 == 0
    job = {
        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "agentId": "main",
        "name": f"Job {i:06d}",
        "enabled": i % 10 != 0,
        "createdAtMs": now - i * 1000,
        "updatedAtMs": now - i * 500,
        "schedule": schedule,
        "sessionTarget": "main" if main else "isolated",
        "wakeMode": "now",
        "payload": {"kind": "systemEvent", "text": f"Reminder {i}"} if main
                   else {"kind": "agentTurn", "message": f"Check item {i}"},
        "state": {"nextRunAtMs": now + rng.randrange(86400000), "lastRunStatus": "ok"},
    }
    jobs.append(job)
json.dump({"version": 1, "jobs": jobs}, open(path, "w"), indent=2)
PY
size=$(du -m "$home/.almanac/cron/jobs.json" | cut -f1)
echo "cron, $COUNT jobs in a ${size} MB jobs.json, $(nproc) cores"
start=$(date +%s%N)
"$ALMANAC" cron list --json --limit 200 >/dev/null
echo "first cron list (index built)      $(( ($(date +%s%N) - start) / 1000000 )) ms"
hyperfine_median "cron list --json --limit 200" "$ALMANAC cron list --json --limit 200"
hyperfine_median "cron list --query" "$ALMANAC cron list --json --query 04999"
hyperfine_median "cron status --json" "$ALMANAC cron status --json"
id=$("$ALMANAC" cron list --json --limit 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["id"])')
start=$(date +%s%N)
"$ALMANAC" cron disable "$id" >/dev/null
echo "cron disable (file rewritten)      $(( ($(date +%s%N) - start) / 1000000 )) ms"
hyperfine_median "cron list after a change" "$ALMANAC cron list --json --limit 200"

# One change of one job at a time, by id prefix as a user types it.
RUNS="${RUNS:-15}"
ms_of() {
    local start
    start=$(date +%s%N)
    "$@" >/dev/null
    echo $(( ($(date +%s%N) - start) / 1000000 ))
}
median() { sort -n | awk '{v[NR] = $1} END {printf "median %5d ms   min %5d ms   max %5d ms", v[int((NR + 1) / 2)], v[1], v[NR]}'; }
prefix="${id:0:8}"
report() { printf '%-34s %s\n' "$1 ($COUNT jobs)" "$(median)"; }
for i in $(seq "$RUNS"); do ms_of "$ALMANAC" cron edit "$prefix" --name "Edited $i"; done | report "cron edit --name"
: >"$BENCH_OUT/cron_enable.ms"
for i in $(seq "$RUNS"); do
    ms_of "$ALMANAC" cron enable "$prefix" >>"$BENCH_OUT/cron_enable.ms"
    ms_of "$ALMANAC" cron disable "$prefix"
done | report "cron disable"
report "cron enable" <"$BENCH_OUT/cron_enable.ms"
: >"$BENCH_OUT/cron_rm.ms"
for i in $(seq "$RUNS"); do
    start=$(date +%s%N)
    "$ALMANAC" cron add --json --name "Added $i" --every 1h --system-event "ping $i" >"$BENCH_OUT/cron_added.json"
    echo $(( ($(date +%s%N) - start) / 1000000 ))
    added=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["id"])' <"$BENCH_OUT/cron_added.json")
    ms_of "$ALMANAC" cron rm "$added" >>"$BENCH_OUT/cron_rm.ms"
done | report "cron add"
report "cron rm" <"$BENCH_OUT/cron_rm.ms"
