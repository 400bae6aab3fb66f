#!/usr/bin/env bash
# Multi-agent routing: which agent an inbound chat message goes to, and its
# session key, with 50 agents and 500 bindings (DMs and groups bound to
# agents, forum topics, thread parents, bot accounts, channels taken
# whole) over 200,000 messages that reach every tier. Figures are the
# median of 5 rounds, per message, in a release build.
#
#   bench/agents.sh [RUNS]
#   BASELINE_BIN=path bench/agents.sh   the turn overhead also on an older
#                                       build (one without agents), turn
#                                       for turn
set -euo pipefail
cd "$(dirname "$0")/.."

cargo run --release -q -p almanac-routing --example route_bench

# turn overhead outside the model: below
echo
echo "turn overhead outside the model, 50 agents and 500 bindings in the config:"
AGENTS_ROSTER=1 bench/agent.sh "${1:-20}"
