#!/usr/bin/env bash
# Skills at scale: 1,000 skills across the six sources (overrides, gates
# of every kind, a few broken files). Reports `skills list --json`,
# `skills prompt`, `skills match` and `skills check` medians.
#
#   bench/skills.sh [COUNT]     (default 1000)
source "$(dirname "$0")/lib.sh"
need_hyperfine
COUNT="${1:-1000}"
build_release

home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
export HOME="$home"
python3 - "$home" "$COUNT" <<'PY'
import json, os, sys
home, n = sys.argv[1], int(sys.argv[2])
roots = [f"{home}/extra", f"{home}/bundled", f"{home}/.almanac/skills", f"{home}/.agents/skills",
         f"{home}/.almanac/workspace/.agents/skills", f"{home}/.almanac/workspace/skills"]
metas = ['{}', '{"openclaw":{"requires":{"bins":["definitely-missing-bin"]}}}',
         '{"openclaw":{"requires":{"anyBins":["nope-a","nope-b"]}}}', '{"clawdbot":{"requires":{"env":["MISSING_TOKEN"]}}}',
         '{"openclaw":{"requires":{"env":["HOME"],"bins":["sh"]}}}', '{"openclaw":{"os":["macos"]}}',
         '{"openclaw":{"requires":{"config":["feature.enabled"]}}}', '{"arka":{"permissions":["admin"]}}']
for i in range(n):
    d = os.path.join(roots[i % 6], f"f{i:04d}")
    os.makedirs(d, exist_ok=True)
    if i % 50 == 7:
        open(f"{d}/SKILL.md", "w").write(f"---\nname: s{i:04d}\n---\nbroken\n")
    elif i % 12 == 3:
        json.dump({"name": f"p{i:04d}", "description": f"plugin {i}", "triggers": [f"do thing {i}"],
                   "metadata": json.loads(metas[i % len(metas)])}, open(f"{d}/skill.json", "w"))
        open(f"{d}/run.sh", "w").write("echo ok\n")
    else:
        open(f"{d}/SKILL.md", "w").write(
            f"---\nname: s{i:04d}\ndescription: Skill number {i}, which does a useful thing when asked.\n"
            f"metadata: {metas[i % len(metas)]}\n---\n# Skill {i}\n\nInstructions.\n")
for i in range(0, n, 60):
    d = os.path.join(roots[5], f"override-{i}")
    os.makedirs(d, exist_ok=True)
    open(f"{d}/SKILL.md", "w").write(f"---\nname: s{i:04d}\ndescription: workspace override\n---\n")
PY
export SKILLS_PATH="$home/extra" ALMANAC_BUNDLED_SKILLS_DIR="$home/bundled"
echo "skills, $COUNT across 6 sources ($("$ALMANAC" skills list --json | python3 -c 'import json,sys; v=json.load(sys.stdin)["skills"]; print(len(v), "listed,", sum(s["eligible"] for s in v), "eligible")')), release, $(nproc) cores"
hyperfine_median "skills list --json" "$ALMANAC skills list --json"
hyperfine_median "skills list" "$ALMANAC skills list"
hyperfine_median "skills check --json" "$ALMANAC skills check --json"
hyperfine_median "skills prompt" "$ALMANAC skills prompt"
hyperfine_median "skills match" "$ALMANAC skills match do thing 15 now"
