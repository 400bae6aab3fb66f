#!/usr/bin/env bash
# Agent turn overhead: everything a turn does outside the model (prompt
# assembly from 150 skills, a 10-year memory and the workspace files;
# transcript and session writes), against a local server that answers
# instantly in the OpenAI streaming protocol.
#
#   bench/agent.sh [RUNS]        (default 40 per message)
#   BASELINE_BIN=path bench/agent.sh   also runs an older build, in a copy
#                                      of the same setup, turn for turn
#   AGENTS_ROSTER=1 bench/agent.sh     with 50 agents and 500 bindings in
#                                      the config (the baseline's copy has
#                                      no config: a build before agents)
#
# Every measured turn starts from the same session: 20 earlier turns (40
# messages) in its transcript, restored before each run. Figures are taken
# inside the process (`agent --json` timings): overhead = everything but
# the model and the tools, i.e. prompt assembly (skills, recall, bootstrap
# files), reading the session, and writing the transcript and sessions.json.
#
# Needs ../shared/bench/gen_memory.py (or GEN_MEMORY=path), hyperfine, python3.
source "$(dirname "$0")/lib.sh"
need_hyperfine
RUNS="${1:-40}"
GEN="$(memory_generator)"
build_release

home="$(mktemp -d)"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$home"; }
trap cleanup EXIT
export HOME="$home" TZ=UTC
ws="$home/.almanac/workspace"
python3 "$GEN" --out "$ws" --days 3650 >/dev/null
printf '# Agents\n\nKeep answers short.\n' > "$ws/AGENTS.md"
if [ -n "${AGENTS_ROSTER:-}" ]; then
    python3 - "$home/.almanac/config.json5" <<'PY'
import json, sys
agents = [{"id": "main", "default": True}] + [{"id": f"agent-{i:02d}"} for i in range(1, 50)]
bindings = [{"agentId": f"agent-{1 + i % 49:02d}",
             "match": {"channel": "telegram",
                       "peer": {"kind": "direct" if i % 2 else "group", "id": str(100000 + i)}}}
            for i in range(500)]
json.dump({"agents": {"list": agents}, "bindings": bindings}, open(sys.argv[1], "w"))
PY
fi
python3 - "$ws/skills" <<'PY'
import os, sys
root = sys.argv[1]
for i in range(150):
    d = os.path.join(root, f"skill-{i:03d}")
    os.makedirs(d, exist_ok=True)
    open(f"{d}/SKILL.md", "w").write(
        f"---\nname: skill-{i:03d}\ndescription: Does task number {i} when the user asks for it.\n---\n# Skill {i}\n")
PY
port_file="$home/port"
python3 - "$port_file" <<'PY' &
import http.server, json, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Noted."}, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                  {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
s = S(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
server_pid=$!
for _ in $(seq 100); do [ -s "$port_file" ] && break; sleep 0.05; done
export OPENAI_BASE_URL="http://127.0.0.1:$(cat "$port_file")/v1"
A="$ALMANAC"
"$A" memory index >/dev/null
"$A" skills list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["skills"]), "skills,", end=" ")'
echo "10-year memory, release, $(nproc) cores"
for i in $(seq 20); do "$A" agent --model openai/bench --message "earlier message number $i" >/dev/null; done
sessions="$home/.almanac/agents/main/sessions"
cp -a "$sessions" "$home/sessions.seed"
# The baseline gets a copy of the same setup, with its own index and
# caches (their formats may differ between builds).
base_home="$home/baseline-home"
if [ -n "${BASELINE_BIN:-}" ]; then
    mkdir -p "$base_home"
    cp -a "$home/.almanac" "$base_home/"
    rm -rf "$base_home/.almanac/index" "$base_home/.almanac/cache"
    [ -n "${AGENTS_ROSTER:-}" ] && rm -f "$base_home/.almanac/config.json5"
    HOME="$base_home" "$BASELINE_BIN" memory index >/dev/null
    HOME="$base_home" "$BASELINE_BIN" agent --model openai/bench --message "warm up" >/dev/null
fi
# Skill files written within the last 2 s (the bundled skills are written
# out by the first turn) are not trusted by the skills snapshot: file
# times are coarse. A real skill set is older than that.
sleep 2.1
restore="rm -rf $sessions && cp -a $home/sessions.seed $sessions"
hyperfine --style none --shell=bash --warmup 3 --min-runs "$RUNS" --prepare "$restore" \
    --export-json "$BENCH_OUT/agent-turn.json" \
    "$A agent --model openai/bench --message 'what did Alice book last week?'" >/dev/null 2>&1
python3 - "$BENCH_OUT/agent-turn.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(f"agent turn, wall (instant model)   median {r['median']*1000:7.2f} ms   min {r['min']*1000:7.2f} ms")
PY
python3 - "$A" "$RUNS" "$home" "${BASELINE_BIN:-}" "$base_home" <<'PY'
import json, os, shutil, statistics, subprocess, sys
almanac, runs, home, baseline, base_home = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
seed = os.path.join(home, "sessions.seed")
builds = [("", almanac, home)] + ([("baseline", baseline, base_home)] if baseline else [])
messages = ["what did Alice book last week?", "plan my morning routine", "remind me about the dentist", "hi"]
print("inside the process, median of", runs, "runs per message (ms)" + (", turn for turn with the baseline:" if baseline else ":"))
print(f"  {'message':<34}{'overhead':>9}{'assembly':>9}{'model':>7}{'total':>7}  skills")
overall = {label: [] for label, _, _ in builds}
for msg in messages:
    rows = {label: [] for label, _, _ in builds}
    for _ in range(runs):
        # The builds take turns, so a slower moment of the machine falls on both.
        for label, binary, h in builds:
            sessions = os.path.join(h, ".almanac/agents/main/sessions")
            shutil.rmtree(sessions)
            shutil.copytree(seed, sessions, symlinks=True)
            out = subprocess.run([binary, "agent", "--model", "openai/bench", "--message", msg, "--json"],
                                 capture_output=True, text=True, check=True, env=dict(os.environ, HOME=h)).stdout
            rows[label].append(json.loads(out)["timings"])
    for label, _, _ in builds:
        r = rows[label]
        med = lambda k: statistics.median(x[k] for x in r)
        overall[label] += [x["overheadMs"] for x in r]
        built = [i for i, x in enumerate(r) if x["skills"] != "cached"]
        note = f"rebuilt in runs {built}" if built else "all from the snapshot"
        name = repr(msg) if not label else f"  {label}"
        print(f"  {name:<34}{med('overheadMs'):9.2f}{med('assembleMs'):9.2f}{med('modelMs'):7.2f}{med('totalMs'):7.2f}  {note}")
for label, _, _ in builds:
    o = sorted(overall[label])
    print(f"  {label or 'all messages'}: overhead median {statistics.median(o):.2f} ms, p90 {o[int(len(o) * 0.9)]:.2f} ms")
if baseline:
    ratio = statistics.median(overall[""]) / statistics.median(overall["baseline"])
    print(f"  overhead, this build / baseline: {ratio:.2f}x")
PY
