#!/usr/bin/env bash
# The MCP server over stdio (`almanac mcp serve`) on a synthetic memory
# (10 years by default), words only (no embedding provider). Prints:
#   * start to `initialize` answered: a new server each time, from the
#     spawn to the answer's line on its stdout (p50, p95 of STARTS);
#   * `memory_search` round trips in one session, from the request line
#     written to the answer read (p50, p95 of RUNS per query), without a
#     gateway (the server searches itself) and with one running for the
#     state directory (the call forwarded to it).
#
#   bench/mcp.sh                  (DAYS=3650, RUNS=40, STARTS=30)
#   DAYS=30 RUNS=10 ALMANAC_BIN=target/debug/almanac bench/mcp.sh
#
# Needs ../shared/bench/gen_memory.py (or GEN_MEMORY=path) and python3.
source "$(dirname "$0")/lib.sh"
DAYS="${DAYS:-3650}"
RUNS="${RUNS:-40}"
STARTS="${STARTS:-30}"
GEN="$(memory_generator)"
build_release

work="$(mktemp -d)"
gw=""
cleanup() {
    if [ -n "$gw" ]; then kill "$gw" 2>/dev/null && wait "$gw" 2>/dev/null; fi
    rm -rf "$work"
}
trap cleanup EXIT
export HOME="$work/home" TZ=UTC
mkdir -p "$HOME/.almanac"
printf '{agents: {defaults: {heartbeat: {every: "0m"}, memorySearch: {provider: "none"}}}}\n' >"$HOME/.almanac/config.json5"
python3 "$GEN" --out "$HOME/.almanac/workspace" --days "$DAYS" >/dev/null
"$ALMANAC" memory index >/dev/null
echo "mcp serve over stdio, $DAYS days ($(find "$HOME/.almanac/workspace/memory" -name '*.md' | wc -l) daily files), words only, $(basename "$(dirname "$ALMANAC")") build, $(nproc) cores"

measure() {
    python3 - "$ALMANAC" "$1" "$RUNS" "$STARTS" <<'PY'
import json, subprocess, sys, time
almanac, label, runs, starts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}

def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]

def start():
    began = time.perf_counter_ns()
    proc = subprocess.Popen([almanac, "mcp", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, bufsize=0)
    proc.stdin.write((json.dumps(INIT) + "\n").encode())
    answer = json.loads(proc.stdout.readline())
    took = (time.perf_counter_ns() - began) / 1e6
    assert answer["result"]["serverInfo"]["name"] == "almanac", answer
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    return proc, took

if label == "without a gateway":
    times = []
    for _ in range(starts):
        proc, took = start()
        times.append(took)
        proc.stdin.close()
        proc.wait()
    print(f"start to initialize answered: p50 {pct(times, 50):.1f} ms, p95 {pct(times, 95):.1f} ms ({starts} starts)")

queries = ["Zephyrine Labs badge number", "gate code for my storage", "what did Alice book for the trip",
           "recipe with pistachios and oranges", "hotel booking for Portugal"]
proc, _ = start()
times, ident, hits = [], 1, 0
for q in queries:
    for i in range(runs + 2):
        ident += 1
        line = json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                           "params": {"name": "memory_search", "arguments": {"query": q, "maxResults": 6}}})
        began = time.perf_counter_ns()
        proc.stdin.write((line + "\n").encode())
        answer = json.loads(proc.stdout.readline())
        took = (time.perf_counter_ns() - began) / 1e6
        assert answer.get("id") == ident and "result" in answer, answer
        if i >= 2:  # the first two warm the path
            times.append(took)
            hits += len(answer["result"]["structuredContent"]["hits"])
proc.stdin.close()
proc.wait()
print(f"memory_search {label}: p50 {pct(times, 50):.2f} ms, p95 {pct(times, 95):.2f} ms "
      f"({len(times)} calls, {hits / len(times):.1f} hits each)")
PY
}

measure "without a gateway"
ALMANAC_LOG=warn "$ALMANAC" gateway run --port 0 >/dev/null 2>"$work/gateway.log" &
gw=$!
for _ in $(seq 400); do
    port="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$HOME/.almanac/gateway.json" 2>/dev/null || true)"
    if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; then break; fi
    sleep 0.05
done
[ -n "$port" ] || { cat "$work/gateway.log" >&2; echo "the gateway did not start" >&2; exit 1; }
measure "through the gateway"
