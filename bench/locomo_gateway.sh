#!/usr/bin/env bash
# The index command bench/locomo.sh gives the harness in its `gateway`
# mode: indexes the conversation's workspace, stops the gateway of the
# one before, starts a gateway on this one and warms it (model loaded,
# vectors in memory), so every question is a warm search through it.
#
#   bench/locomo_gateway.sh ALMANAC WORKSPACE
set -euo pipefail
almanac="$1"
ws="$2"
"$almanac" --workspace "$ws" memory index >/dev/null
"$almanac" gateway stop >/dev/null 2>&1 || true
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
setsid "$almanac" --workspace "$ws" gateway run --port "$port" >/dev/null 2>&1 </dev/null &
for _ in $(seq 600); do
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.05
done
"$almanac" --workspace "$ws" memory search --json -- "warm up" >/dev/null
