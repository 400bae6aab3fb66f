"""Drives almanac's MCP server with the official Python SDK (`mcp`).

    mcp_client.py stdio <almanac> [legacy|auto]     (HOME from the environment)
    mcp_client.py http <url> <token> [legacy|auto]
    mcp_client.py http-restart <url> <token>        (prints RESTART, waits for a line on stdin)

Prints one JSON object: what the server said, for the test to check.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def error_of(exc):
    err = getattr(exc, "error", None)
    return {"code": getattr(err, "code", None), "message": getattr(err, "message", str(exc))}


async def exercise(client):
    out = {"protocolVersion": client.protocol_version}
    tools = await client.list_tools()
    out["tools"] = sorted(t.name for t in tools.tools)
    out["schemas"] = {t.name: t.input_schema for t in tools.tools}
    calls = {
        "memory_search": {"query": "Biscuit dog"},
        "memory_get": {"path": "MEMORY.md"},
        "session_memory_search": {"query": "Biscuit"},
        "session_memory_context": {"query": "the dog", "budget": 500},
        "skills_list": {},
        "skill_get": {"name": "system-health"},
        "cron_list": {},
        "heartbeat_last": {},
        "memory_append": {"text": "The user's cat is called Miso."},
        "cron_add": {
            "name": "water plants",
            "schedule": {"kind": "every", "everyMs": 3600000},
            "payload": {"kind": "systemEvent", "text": "Water the plants"},
        },
        "system_event": {"text": "Ask about the plants", "mode": "next-heartbeat"},
    }
    out["calls"] = {}
    for name, args in calls.items():
        if name not in out["tools"]:
            continue
        try:
            result = await client.call_tool(name, args)
            out["calls"][name] = {
                "isError": bool(result.is_error),
                "structured": result.structured_content,
                "text": "".join(getattr(c, "text", "") for c in result.content),
            }
        except MCPError as exc:
            out["calls"][name] = {"error": error_of(exc)}
    added = out["calls"].get("cron_add", {}).get("structured") or {}
    job_id = (added.get("job") or {}).get("id")
    if job_id and "cron_remove" in out["tools"]:
        result = await client.call_tool("cron_remove", {"id": job_id})
        out["calls"]["cron_remove"] = {"isError": bool(result.is_error), "structured": result.structured_content}
    bad = {}
    for label, (name, args) in {
        "wrongType": ("memory_search", {"query": 42}),
        "missing": ("memory_get", {}),
        "unknownTool": ("no_such_tool", {}),
    }.items():
        try:
            await client.call_tool(name, args)
            bad[label] = {"error": None}
        except MCPError as exc:
            bad[label] = {"error": error_of(exc)}
    out["bad"] = bad
    resources = await client.list_resources()
    out["resources"] = sorted(str(r.uri) for r in resources.resources)
    templates = await client.list_resource_templates()
    out["templates"] = sorted(t.uri_template for t in templates.resource_templates)
    read = await client.read_resource("memory://MEMORY.md")
    out["memoryMd"] = "".join(getattr(c, "text", "") for c in read.contents)
    try:
        await client.read_resource("memory://daily/1999-01-01")
        out["missingResource"] = None
    except MCPError as exc:
        out["missingResource"] = error_of(exc)
    # The server still serves after every refusal.
    again = await client.call_tool("memory_get", {"path": "MEMORY.md", "lines": 1})
    out["afterErrors"] = again.structured_content
    return out


async def stdio(almanac, mode):
    params = StdioServerParameters(command=almanac, args=["mcp", "serve"], env=dict(os.environ))
    async with Client(params, mode=mode, read_timeout_seconds=60) as client:
        return await exercise(client)


def http_transport(url, token):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return streamable_http_client(url, http_client=http)


async def http(url, token, mode):
    async with Client(http_transport(url, token), mode=mode, read_timeout_seconds=60) as client:
        return await exercise(client)


async def http_restart(url, token):
    out = {}
    async with Client(http_transport(url, token), mode="legacy", read_timeout_seconds=30) as client:
        first = await client.call_tool("memory_search", {"query": "Biscuit"})
        out["before"] = len((first.structured_content or {}).get("hits", []))
        print("RESTART", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        try:
            await client.call_tool("memory_search", {"query": "Biscuit"})
            out["oldSession"] = "answered"
        except Exception as exc:  # the session died with the gateway
            out["oldSession"] = type(exc).__name__ + ": " + str(getattr(exc, "error", exc))[:200]
    async with Client(http_transport(url, token), mode="legacy", read_timeout_seconds=30) as client:
        again = await client.call_tool("memory_search", {"query": "Biscuit"})
        out["after"] = len((again.structured_content or {}).get("hits", []))
    return out


def main():
    kind = sys.argv[1]
    if kind == "stdio":
        result = asyncio.run(stdio(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "auto"))
    elif kind == "http":
        result = asyncio.run(http(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "auto"))
    elif kind == "http-restart":
        result = asyncio.run(http_restart(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(f"unknown mode {kind}")
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
