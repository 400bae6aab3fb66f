#!/usr/bin/env bash
# Makes target/mcp-venv, a Python virtual environment with the official
# MCP SDK (PyPI `mcp`, pinned), once; prints its python. The MCP tests
# and bench/mcp.sh drive almanac's MCP server with it.
#
#   bench/mcp_venv.sh               (needs python3 with venv and the package registry)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/target/mcp-venv"
version="2.3.0"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import mcp, importlib.metadata as m; assert m.version('mcp') == '$version'" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$version" >&2
fi
echo "$venv/bin/python"
