#!/usr/bin/env bash
# Cron across crashes: JOBS jobs with seconds-resolution schedules and a
# systemEvent payload (next-heartbeat: no model), the real gateway killed
# with -9 at random moments for SECONDS seconds; then every slot in the
# slot ledger and the run logs is checked against when the gateway was up.
# The ledger keeps a short history per job, cut back at each start, so it
# is read after each stop and the readings put together.
#
#   bench/cron_restart.sh                  (JOBS=200 SECONDS_TOTAL=180)
#   JOBS=50 SECONDS_TOTAL=40 bench/cron_restart.sh   (a quick look)
source "$(dirname "$0")/lib.sh"
JOBS="${JOBS:-200}"
SECONDS_TOTAL="${SECONDS_TOTAL:-180}"
SEED="${SEED:-7}"
build_release

work="$(mktemp -d)"
trap 'pkill -9 -f "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
export TZ=UTC
echo "cron restart fuzz, release, $(nproc) cores: $JOBS jobs, ${SECONDS_TOTAL} s, seed $SEED"
BENCH_DIR="$BENCH_ROOT/bench" python3 - "$ALMANAC" "$work" "$JOBS" "$SECONDS_TOTAL" "$SEED" <<'PY'
import json, os, random, signal, sqlite3, subprocess, sys, time
almanac, work, jobs_n, total, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
sys.path.insert(0, os.environ["BENCH_DIR"])
from gateway_probe import free_port, ready
rng = random.Random(seed)
home = os.path.join(work, "home")
state = os.path.join(home, ".almanac")
os.makedirs(os.path.join(state, "cron"), exist_ok=True)
env = {"HOME": home, "PATH": os.environ["PATH"], "TZ": "UTC", "ALMANAC_HEARTBEAT_EVERY": "0m"}
now_ms = int(time.time() * 1000)
policies = ["once", "all", "skip"]
jobs = []
for i in range(jobs_n):
    step = [1, 2, 3, 5][i % 4]
    jobs.append({
        "id": f"job-{i:04d}", "name": f"tick {i}", "enabled": True,
        "createdAtMs": now_ms, "updatedAtMs": now_ms,
        "schedule": {"kind": "cron", "expr": f"{i % step}-59/{step} * * * * *", "tz": "UTC", "staggerMs": 0},
        "sessionTarget": "main", "wakeMode": "next-heartbeat",
        "payload": {"kind": "systemEvent", "text": f"tick {i}"},
        "catchUp": policies[i % 3],
    })
json.dump({"version": 1, "jobs": jobs}, open(os.path.join(state, "cron", "jobs.json"), "w"), indent=2)

by_job = {}    # job -> slot -> (status, trigger), as the ledger last showed it
def snapshot():
    db = sqlite3.connect(os.path.join(state, "almanac.sqlite"))
    for job_id, slot, status, trigger in db.execute("SELECT job_id, slot_ms, status, trigger FROM cron_slots"):
        # A run a kill cut off is recorded interrupted at the next start.
        by_job.setdefault(job_id, {})[slot] = ("interrupted" if status == "running" else status, trigger)
    db.close()

windows = []   # (up_from_ms, up_until_ms)
began = time.time()
kills = 0
last = False
while not last:
    port = free_port()
    proc = subprocess.Popen([almanac, "gateway", "run", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    while not ready(port):
        if proc.poll() is not None:
            sys.exit(f"the gateway exited with {proc.returncode}")
        time.sleep(0.002)
    up_from = int(time.time() * 1000)
    stay = rng.uniform(3, 15)
    # The last start ends with SIGTERM, so what the kill before it cut
    # off is recorded.
    last = time.time() - began + stay >= total
    time.sleep(stay)
    if last:
        proc.send_signal(signal.SIGTERM); proc.wait(timeout=20)
    else:
        proc.send_signal(signal.SIGKILL); proc.wait(); kills += 1
    windows.append((up_from, int(time.time() * 1000)))
    snapshot()
    if not last:
        time.sleep(rng.uniform(2, 8))
end_ms = windows[-1][1]
first_ms = windows[0][0]


MARGIN = 1000   # ms around a start or a kill where either outcome is right
def window_of(slot):
    for i, (a, b) in enumerate(windows):
        if a + MARGIN <= slot <= b - MARGIN:
            return ("up", i)
    for i in range(1, len(windows)):
        if windows[i - 1][1] + MARGIN <= slot <= windows[i][0] - MARGIN:
            return ("down", i)
    return ("edge", None)

counts = {"slots": 0, "up_on_time": 0, "up_wrong": 0, "down_ran": 0, "down_missed": 0, "down_wrong": 0,
          "edge": 0, "absent": 0, "edge_absent": 0, "interrupted": 0, "log_lines": 0, "log_duplicates": 0, "log_mismatch": 0}
for idx, job in enumerate(jobs):
    step = [1, 2, 3, 5][idx % 4]
    offset = idx % step
    policy = job["catchUp"]
    have = by_job.get(job["id"], {})
    # Every slot from the first start to the end.
    slots = [s for s in range((first_ms // 1000 + 1) * 1000, end_ms - MARGIN, 1000)
             if (s // 1000) % 60 >= offset and ((s // 1000) % 60 - offset) % step == 0]
    down_slots = {}
    for s in slots:
        counts["slots"] += 1
        where, i = window_of(s)
        got = have.get(s)
        if got is None:
            counts["absent"] += 1
            if where == "edge":
                counts["edge_absent"] += 1
            continue
        status, trigger = got
        if status == "interrupted":
            counts["interrupted"] += 1
        if where == "up":
            if trigger == "due" and status in ("ok", "interrupted"):
                counts["up_on_time"] += 1
            else:
                counts["up_wrong"] += 1
        elif where == "down":
            down_slots.setdefault(i, []).append((s, status, trigger))
        else:
            counts["edge"] += 1
    for i, entries in down_slots.items():
        entries.sort()
        for k, (s, status, trigger) in enumerate(entries):
            ran = status in ("ok", "interrupted")
            if ran:
                counts["down_ran"] += 1
            else:
                counts["down_missed"] += 1
            expected_run = policy == "all" or (policy == "once" and k == len(entries) - 1)
            # `once` runs the latest missed slot of the window, which may be
            # an edge slot: the others must still be missed.
            if policy == "once" and not expected_run and ran:
                counts["down_wrong"] += 1
            if policy == "skip" and ran:
                counts["down_wrong"] += 1
            if policy == "all" and not ran:
                counts["down_wrong"] += 1
    log = os.path.join(state, "cron", "runs", f"{job['id']}.jsonl")
    seen = set()
    if os.path.exists(log):
        for line in open(log):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            counts["log_lines"] += 1
            key = rec.get("slotMs")
            if key in seen:
                counts["log_duplicates"] += 1
            seen.add(key)
    ran_rows = sum(1 for st, _ in have.values() if st in ("ok", "error", "skipped"))
    if ran_rows != len(seen):
        counts["log_mismatch"] += abs(ran_rows - len(seen))
print(f"runs: {len(windows)} gateway starts, {kills} kill -9, up {sum(b - a for a, b in windows) / 1000:.0f} s of {(end_ms - first_ms) / 1000:.0f} s")
print(f"slots checked {counts['slots']}: on time while up {counts['up_on_time']}, wrong while up {counts['up_wrong']}, "
      f"within {MARGIN} ms of a start or kill (either is right) {counts['edge']}; "
      f"absent from the ledger {counts['absent']} ({counts['edge_absent']} of them near a start or kill)")
print(f"slots while down: ran {counts['down_ran']}, recorded missed {counts['down_missed']}, against the policy {counts['down_wrong']}")
print(f"interrupted {counts['interrupted']}; run-log lines {counts['log_lines']}, duplicate slots in logs {counts['log_duplicates']}, "
      f"ledger/log differences {counts['log_mismatch']}; duplicate slot claims: 0 by the ledger's key")
PY
