#!/usr/bin/env bash
# Subagents under load: one turn spawns CHILDREN children at once
# (`maxChildrenPerAgent` = CHILDREN, `subagents.maxConcurrent` 8, turns of
# all kinds `agents.defaults.maxConcurrent` = TURNS, default 4 as the
# config's default) against an instant local model
# (bench/subagents_server.py), through a running gateway. Prints:
#   * each child's turn time from its start to its end in the ledger
#     (p50, p95) with a model that answers at once: the gateway's own work
#     per child plus one local model round trip;
#   * the wall time from the spawn to the last child's end, per child;
#   * the gateway's CPU time (user + system) per child: its turn, its
#     announce and the parent's relay turn;
#   * the gateway's private memory (RssAnon) before and at its peak while
#     the children run (sampled every 10 ms);
#   * how many announces reached the parent's session (each must be there
#     once).
#
#   bench/subagents.sh [CHILDREN]     (default 50; ROUNDS=3 runs, then the medians)
#   TURNS=8 bench/subagents.sh          (8 turns at once on the machine's cores)
#   PERF_OUT=file (PERF_FREQ=Hz), GATEWAY_LOG=filter KEEP_LOG=file: a profile, the log
source "$(dirname "$0")/lib.sh"
CHILDREN="${1:-50}"
# A profile or a log is of one round.
[ -n "${PERF_OUT:-}${KEEP_LOG:-}" ] && ROUNDS=1
if in_rounds \
    "gateway CPU per child, ms=([0-9.]+) ms per child \(its" \
    "peak private memory, MB=peak ([0-9.]+) MB" \
    "spawn to last child ended, ms per child=ended: [0-9]+ ms, ([0-9.]+) ms per child" \
    "announces in the parent's session=session: ([0-9]+) of" \
    -- "$0" "$@"; then exit 0; fi
build_release

home="$(mktemp -d)"
server_pid=""; gw_pid=""; sampler_pid=""
cleanup() {
    [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
    [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null && wait "$gw_pid" 2>/dev/null
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    [ -n "${KEEP_LOG:-}" ] && cp "$home/gateway.log" "$KEEP_LOG"
    rm -rf "$home"
}
trap cleanup EXIT
export HOME="$home" TZ=UTC
python3 "$BENCH_ROOT/bench/subagents_server.py" "$home/port" "$CHILDREN" &
server_pid=$!
for _ in $(seq 100); do [ -s "$home/port" ] && break; sleep 0.05; done
port="$(cat "$home/port")"
mkdir -p "$home/.almanac/workspace"
cat >"$home/.almanac/config.json5" <<JSON
{"agents": {"defaults": {"model": "openai/bench", "maxConcurrent": ${TURNS:-4}, "heartbeat": {"every": "0m"},
   "subagents": {"maxChildrenPerAgent": $CHILDREN, "maxConcurrent": 8}}}}
JSON
export OPENAI_BASE_URL="http://127.0.0.1:$port/v1"
ALMANAC_LOG="${GATEWAY_LOG:-warn}" "$ALMANAC" gateway run --port 0 >/dev/null 2>"$home/gateway.log" &
gw_pid=$!
ready=""
for _ in $(seq 400); do
    gw_port="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$home/.almanac/gateway.json" 2>/dev/null || true)"
    if [ -n "$gw_port" ] && curl -sf "http://127.0.0.1:$gw_port/readyz" >/dev/null; then ready=1; break; fi
    sleep 0.05
done
[ -n "$ready" ] || { cat "$home/gateway.log" >&2; echo "the gateway was not ready within 20 s" >&2; exit 1; }
# A gateway past its first seconds: the bundled skills it wrote out at
# start are older than the skills cache's racy window, and its watcher
# has stored the turns' skills cache.
for _ in $(seq 200); do [ -s "$home/.almanac/cache/skills-turn.json" ] && break; sleep 0.05; done
private_kb() { awk '/^RssAnon/ {print $2}' "/proc/$gw_pid/status"; }
before="$(private_kb)"
# The gateway's CPU time in µs, summed over its threads' scheduler
# statistics (exact, where the process's user and system times are
# counted in 10 ms ticks). Every thread lives through the run: the pool's
# idle threads end only after 10 s.
cpu_us() { cat /proc/"$gw_pid"/task/*/schedstat 2>/dev/null | awk '{ns += $1} END {printf "%d", ns / 1000}'; }
ticks_ms() { awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$gw_pid/stat"; }
cpu_before="$(cpu_us)"; ticks_before="$(ticks_ms)"
# PERF_OUT=file records the gateway's profile while the children run.
perf_pid=""
if [ -n "${PERF_OUT:-}" ]; then perf record -F "${PERF_FREQ:-2000}" --call-graph dwarf,16384 -p "$gw_pid" -o "$PERF_OUT" 2>/dev/null & perf_pid=$!; sleep 0.5; fi
( peak=0; while kill -0 "$gw_pid" 2>/dev/null; do
    kb="$(private_kb 2>/dev/null || echo 0)"; [ "${kb:-0}" -gt "$peak" ] && peak="$kb" && echo "$peak" >"$home/peak"
    sleep 0.01; done ) &
sampler_pid=$!
start_ns="$(date +%s%N)"
"$ALMANAC" agent --message "SPAWN-BENCH" --json >"$home/agent.out" || { cat "$home/agent.out" "$home/gateway.log" >&2; exit 1; }
grep -q 'accepted' "$home/agent.out" || { echo "the spawns were not accepted:" >&2; cat "$home/agent.out" >&2; exit 1; }
python3 - "$ALMANAC" "$CHILDREN" "$start_ns" <<'PY'
import json, subprocess, sys, time
almanac, n, start_ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def tasks():
    out = subprocess.run([almanac, "tasks", "list", "--runtime", "subagent", "--json"], capture_output=True, text=True).stdout
    return json.loads(out)["tasks"]
deadline = time.monotonic() + float(__import__("os").environ.get("BENCH_WAIT", "600"))
while True:
    found = tasks()
    if len(found) >= n and all(t["status"] != "queued" and t["status"] != "running" for t in found):
        break
    if time.monotonic() > deadline:
        sys.exit(f"only {len(found)} children, not all ended, after 600 s")
    time.sleep(0.05)
turns = sorted(t["endedAt"] - t["startedAt"] for t in found)
span = max(t["endedAt"] for t in found) - start_ns / 1e6
ok = sum(t["status"] == "succeeded" for t in found)
print(f"{len(found)} children, {ok} succeeded")
print(f"child turn, start to end (instant model): p50 {turns[len(turns) // 2]:.0f} ms, p95 {turns[int(len(turns) * 0.95) - 1]:.0f} ms")
print(f"spawn to last child ended: {span:.0f} ms, {span / n:.1f} ms per child")
def announces():
    out = subprocess.run([almanac, "sessions", "show", "agent:main:main", "--json"], capture_output=True, text=True).stdout
    msgs = json.loads(out)["messages"]
    return sum(json.dumps(m).count("Status: ok") for m in msgs if m["role"] == "user")
told = 0
while time.monotonic() < deadline:
    told = announces()
    pending = [t for t in tasks() if t["deliveryStatus"] != "session_queued"]
    if told >= n or (not pending and told >= n):
        break
    time.sleep(0.1)
time.sleep(0.5)
told = announces()
print(f"announces in the parent's session: {told} of {n}" + ("" if told == n else "  <-- MISMATCH"))
PY
cpu_after="$(cpu_us)"; ticks_after="$(ticks_ms)"
[ -n "$perf_pid" ] && kill -INT "$perf_pid" && wait "$perf_pid" 2>/dev/null
echo "model answers: $(curl -s "http://127.0.0.1:$port/")"
python3 -c 'import sys; t, n = int(sys.argv[1]) / 1000, int(sys.argv[2]); print(f"gateway CPU time: {t:.0f} ms in all, {t / n:.2f} ms per child (its turn, its ledger task, its announce, its share of the relay turns; the process ticks say {sys.argv[3]} ms)")' "$((cpu_after - cpu_before))" "$CHILDREN" "$((ticks_after - ticks_before))"
kill "$sampler_pid" 2>/dev/null; sampler_pid=""
peak="$(cat "$home/peak" 2>/dev/null || echo 0)"
echo "gateway private memory: $((before / 1024)) MB before, peak $((peak / 1024)).$(( (peak % 1024) * 10 / 1024 )) MB while the children ran"
