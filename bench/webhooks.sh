#!/usr/bin/env bash
# Webhooks: POST <hooks.path>/wake with a valid token under wrk (-t1 -c32,
# loopback), every event in the intake log before its 200; the same load
# on GET /healthz (no body, no token, no write) as this machine's floor;
# then keyed requests (Idempotency-Key), and the refusals (a bad token).
# After each run: the records in the intake log and the gateway's memory.
#
#   bench/webhooks.sh                 (WRK_SECONDS=10)
#   WRK_SECONDS=3 bench/webhooks.sh   (a quick look)
#
# Needs python3, curl and wrk (apt-get install wrk).
source "$(dirname "$0")/lib.sh"
command -v wrk >/dev/null 2>&1 || { echo "wrk is required (apt-get install wrk)" >&2; exit 1; }
WRK_SECONDS="${WRK_SECONDS:-10}"
build_release

work="$(mktemp -d)"
trap 'kill "${gw:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
export TZ=UTC
home="$work/home"
mkdir -p "$home/.almanac"
token="bench-hook-token-$$"
cat >"$home/.almanac/config.json5" <<EOF
{hooks: {enabled: true, token: "$token", path: "/hooks"}}
EOF
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
HOME="$home" "$ALMANAC" gateway run --port "$port" >"$work/gateway.log" 2>&1 &
gw=$!
until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do sleep 0.01; done

# Each request has its own text; `next-heartbeat` queues the event without
# waking a turn (no model is configured here).
lua() {
    local name="$1" path="$2" auth="$3" keyed="$4"
    cat >"$work/$name.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $auth"
counter = 0
request = function()
  counter = counter + 1
  local headers = wrk.headers
  if $keyed then
    -- A table given to wrk.format replaces wrk.headers: copy them.
    headers = { ["Idempotency-Key"] = "key-" .. counter .. "-" .. math.random(1000000000) }
    for k, v in pairs(wrk.headers) do headers[k] = v end
  end
  return wrk.format(nil, "$path", headers, '{"text": "build ' .. counter .. ' finished", "mode": "next-heartbeat"}')
end
LUA
}
lua wake /hooks/wake "$token" false
lua keyed /hooks/wake "$token" true
lua refused /hooks/wake "not-the-token" false

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$gw/status"; }
# The intake log's sequence mark: every accepted record takes the next
# number, and the feeder writes the last one it fed to `intake.applied`.
fed_mark() { cat "$home/.almanac/gateway/intake.applied" 2>/dev/null || echo 0; }

run() {
    local label="$1" out="$BENCH_OUT/webhooks-$2.txt"
    shift 2
    wrk -t1 -c32 -d"${WRK_SECONDS}s" --latency "$@" >"$out"
    python3 - "$label" "$out" "$(rss_kb)" <<'PY'
import re, sys
label, path, rss = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(path).read()
pct = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", text, re.M))
rps = float(re.search(r"Requests/sec:\s+(\S+)", text).group(1))
total = int(re.search(r"(\d+) requests in", text).group(1))
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
print(f"{label:<40} {rps:>9.0f} req/s   p50 {pct['50']:>8}   p99 {pct['99']:>8}   "
      f"{total} requests, non-2xx {errors.group(1) if errors else 0}, RSS {rss / 1024:.1f} MB")
PY
}

echo "webhooks, release, $(nproc) cores, wrk -t1 -c32 -d${WRK_SECONDS}s on loopback"
echo "RSS after start: $(( $(rss_kb) / 1024 )) MB"
run "GET /healthz (floor)" floor "http://127.0.0.1:$port/healthz"
before="$(fed_mark)"
run "POST /hooks/wake" wake -s "$work/wake.lua" "http://127.0.0.1:$port"
sleep 0.5
answered="$(grep -oE '^ +[0-9]+ requests in' "$BENCH_OUT/webhooks-wake.txt" | grep -oE '[0-9]+')"
echo "  records logged and fed: $(( $(fed_mark) - before )) for $answered answers seen by wrk"
run "POST /hooks/wake + Idempotency-Key" keyed -s "$work/keyed.lua" "http://127.0.0.1:$port"
run "POST /hooks/wake, bad token (401/429)" refused -s "$work/refused.lua" "http://127.0.0.1:$port"
code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")"
echo "GET /healthz afterwards: $code; RSS $(( $(rss_kb) / 1024 )) MB"
