#!/usr/bin/env bash
# The Telegram channel under load: 1,000 direct messages across 50 chats
# (`dmScope: per-peer`, so 50 sessions) through a running gateway, against
# a local Bot API and a model that answers at once (bench/telegram_server.py).
# Prints messages per second from the first update queued to the last
# reply sent, latency from update to reply (p50, p99), and the gateway's
# private memory (RssAnon) before (once its start has settled), right
# after the last reply and 1 s later (what it keeps). Model time is near
# zero, so the figures are the gateway's own.
#
#   bench/telegram.sh [MESSAGES] [CHATS]     (default 1000 50; ROUNDS=3 runs, then the medians)
source "$(dirname "$0")/lib.sh"
MESSAGES="${1:-1000}"
CHATS="${2:-50}"
if in_rounds \
    "seconds for all=messages in ([0-9.]+) s" \
    "messages/s=([0-9.]+) messages/s" \
    "p99 update to reply, ms=p99 ([0-9.]+) ms" \
    "private memory growth right after, MB=growth ([0-9.]+) MB;" \
    "private memory growth 1 s later, MB=1 s later [0-9]+ kB, growth ([0-9.]+) MB" \
    -- "$0" "$@"; then exit 0; fi
build_release

home="$(mktemp -d)"
server_pid=""; gw_pid=""
cleanup() {
    [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    rm -rf "$home"
}
trap cleanup EXIT
export HOME="$home" TZ=UTC
python3 "$BENCH_ROOT/bench/telegram_server.py" "$home/port" &
server_pid=$!
for _ in $(seq 100); do [ -s "$home/port" ] && break; sleep 0.05; done
port="$(cat "$home/port")"
mkdir -p "$home/.almanac/workspace"
cat >"$home/.almanac/config.json5" <<JSON
{"agents": {"defaults": {"model": "openai/bench", "heartbeat": {"every": "0m"}}},
 "session": {"dmScope": "per-peer"},
 "channels": {"telegram": {"botToken": "123456:BENCH-token", "apiRoot": "http://127.0.0.1:$port", "dmPolicy": "open"}}}
JSON
export OPENAI_BASE_URL="http://127.0.0.1:$port/v1"
"$ALMANAC" gateway run --port 0 >/dev/null 2>"$home/gateway.log" &
gw_pid=$!
for _ in $(seq 200); do
    "$ALMANAC" gateway status --json 2>/dev/null | grep -q '"telegram:default"' && break
    sleep 0.05
done
private_kb() { awk '/^RssAnon/ {print $2}' "/proc/$gw_pid/status"; }
# The gateway gives back what its start allocated once it has been quiet
# for 10 s; the messages come to a gateway that has settled, as they do
# to one that has run for a while.
sleep "${SETTLE:-11}"
before="$(private_kb)"
curl -s -X POST -d "{\"chats\": $CHATS, \"messages\": $MESSAGES}" "http://127.0.0.1:$port/_push" >/dev/null
python3 - "$port" "$MESSAGES" <<'PY'
import json, sys, time, urllib.request
port, n = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 600
while True:
    stats = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/_stats"))
    if len(stats["answered"]) >= n or time.monotonic() > deadline:
        break
    time.sleep(0.1)
pushed = {int(k): v for k, v in stats["pushed"].items()}
answered = {int(k): v for k, v in stats["answered"].items()}
lat = sorted((answered[k] - pushed[k]) * 1000 for k in answered if k in pushed)
span = max(answered.values()) - min(pushed.values())
print(f"answered {len(answered)} of {n} messages in {span:.2f} s: {len(answered) / span:.0f} messages/s")
print(f"update to reply sent: p50 {lat[len(lat) // 2]:.1f} ms, p99 {lat[int(len(lat) * 0.99) - 1]:.1f} ms")
PY
after="$(private_kb)"
# Again once the gateway has been quiet for a moment: what it keeps.
sleep 1
settled="$(private_kb)"
growth() { awk -v a="$1" -v b="$before" 'BEGIN {printf "%.1f", (a - b) / 1024}'; }
echo "gateway private memory: before ${before} kB; right after the last reply ${after} kB, growth $(growth "$after") MB; 1 s later ${settled} kB, growth $(growth "$settled") MB"
