#!/usr/bin/env bash
# Cron at scale in the gateway: JOBS minute-resolution jobs spread over an
# hour (`M * * * *`, M = i mod 60, so about JOBS/60 fire at each minute)
# with a systemEvent payload (next-heartbeat: no model). The real gateway
# runs for SECONDS_TOTAL seconds; then the slot ledger gives each run's
# lateness (claimed = when the slot was claimed and its task created;
# done = when its event was queued and the batch recorded), and the
# gateway's resident memory is sampled every 200 ms while it runs.
# The first `cron list` (which builds the store's index) is timed before
# the gateway starts; last, `cron list --json --limit 200` is timed on
# the same store.
#
#   bench/cron_scale.sh                   (JOBS=100000 SECONDS_TOTAL=150)
#   JOBS=10000 SECONDS_TOTAL=70 bench/cron_scale.sh
source "$(dirname "$0")/lib.sh"
need_hyperfine
JOBS="${JOBS:-100000}"
SECONDS_TOTAL="${SECONDS_TOTAL:-150}"
build_release

work="$(mktemp -d)"
trap 'pkill -9 -f "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
export TZ=UTC HOME="$work/home"
echo "cron at scale, release, $(nproc) cores: $JOBS jobs, ${SECONDS_TOTAL} s"
BENCH_DIR="$BENCH_ROOT/bench" python3 - "$ALMANAC" "$work" "$JOBS" "$SECONDS_TOTAL" <<'PY'
import json, os, sqlite3, subprocess, sys, time
almanac, work, jobs_n, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
sys.path.insert(0, os.environ["BENCH_DIR"])
from gateway_probe import free_port, ready, rss_kb
home = os.path.join(work, "home")
state = os.path.join(home, ".almanac")
os.makedirs(os.path.join(state, "cron"), exist_ok=True)
env = {"HOME": home, "PATH": os.environ["PATH"], "TZ": "UTC", "ALMANAC_HEARTBEAT_EVERY": "0m"}
now_ms = int(time.time() * 1000)
jobs = [{
    "id": f"job-{i:06d}", "name": f"minute {i % 60} #{i}", "enabled": True,
    "createdAtMs": now_ms, "updatedAtMs": now_ms,
    "schedule": {"kind": "cron", "expr": f"{i % 60} * * * *", "tz": "UTC", "staggerMs": 0},
    "sessionTarget": "main", "wakeMode": "next-heartbeat",
    "payload": {"kind": "systemEvent", "text": f"reminder {i}"},
} for i in range(jobs_n)]
json.dump({"version": 1, "jobs": jobs}, open(os.path.join(state, "cron", "jobs.json"), "w"))
size_mb = os.path.getsize(os.path.join(state, "cron", "jobs.json")) / 1e6

# The first listing of a store nothing has indexed yet builds the index.
import resource
t_list = time.time()
subprocess.run([almanac, "cron", "list", "--json", "--limit", "200"], env=env, check=True,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
first_list_s = time.time() - t_list
first_list_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

port = free_port()
t0 = time.time()
proc = subprocess.Popen([almanac, "gateway", "run", "--port", str(port)], env=env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not ready(port):
    if proc.poll() is not None:
        sys.exit(f"the gateway exited with {proc.returncode}")
    time.sleep(0.005)
ready_s = time.time() - t0
began_ms = int(time.time() * 1000)
samples = []
while time.time() - t0 < total:
    samples.append(rss_kb(proc.pid))
    time.sleep(0.2)
proc.terminate(); proc.wait(timeout=60)
end_ms = int(time.time() * 1000)

db = sqlite3.connect(os.path.join(state, "almanac.sqlite"))
rows = db.execute("SELECT slot_ms, status, started_at, ended_at FROM cron_slots WHERE trigger = 'due'").fetchall()
missed = db.execute("SELECT COUNT(*) FROM cron_slots WHERE status = 'missed'").fetchone()[0]
def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else float("nan")
claimed = [r[2] - r[0] for r in rows if r[2] is not None]
done = [r[3] - r[0] for r in rows if r[3] is not None]
minutes = [m for m in range(began_ms // 60000 + 1, (end_ms - 1000) // 60000 + 1)]
expected = sum(len(range(m % 60, jobs_n, 60)) for m in minutes)
print(f"first cron list (builds the index) {first_list_s * 1000:.0f} ms, max resident {first_list_mb:.0f} MB")
print(f"jobs.json {size_mb:.0f} MB; gateway ready in {ready_s * 1000:.0f} ms; up {(end_ms - began_ms) / 1000:.0f} s, {len(minutes)} minute boundaries")
print(f"slots run {len(rows)} (expected at least {expected}), ok {sum(1 for r in rows if r[1] == 'ok')}, missed {missed}")
print(f"lateness claimed  p50 {pct(claimed, .5)} ms  p99 {pct(claimed, .99)} ms  max {max(claimed, default=0)} ms")
per_boundary = {}
for r in rows:
    if r[2] is not None:
        per_boundary[r[0]] = max(per_boundary.get(r[0], 0), r[2] - r[0])
print("lateness claimed by minute boundary (max ms): " + ", ".join(str(per_boundary[k]) for k in sorted(per_boundary)))
print(f"lateness done     p50 {pct(done, .5)} ms  p99 {pct(done, .99)} ms  max {max(done, default=0)} ms")
print(f"resident memory   after start {samples[0] / 1024:.1f} MB  max {max(samples) / 1024:.1f} MB  last {samples[-1] / 1024:.1f} MB")
PY
hyperfine_median "cron list --json --limit 200 (scale)" "$ALMANAC cron list --json --limit 200"
