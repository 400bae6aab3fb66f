"""An instant OpenAI-style model for bench/subagents.sh. The parent's
first request ("SPAWN-BENCH") is answered with N `sessions_spawn` tool
calls in one answer; a child's turn with "CHILD-OK"; every other turn
(the parent after its tools, the relays) with NO_REPLY. GET /_stats
counts the answers of each kind."""
import http.server, json, socketserver, sys, threading

N = int(sys.argv[2])
lock = threading.Lock()
counts = {"spawn": 0, "child": 0, "other": 0}


def stream(delta, finish):
    parts = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
             {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
             {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}]
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in parts) + "data: [DONE]\n\n").encode()


def text(words):
    return stream({"role": "assistant", "content": words}, "stop")


def spawns():
    calls = [{"index": i, "id": f"s{i}", "type": "function",
              "function": {"name": "sessions_spawn",
                           "arguments": json.dumps({"task": f"Child task {i}", "label": f"c{i}"})}}
             for i in range(N)]
    return stream({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls")


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def reply(self, body, kind):
        head = (f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\n"
                f"content-length: {len(body)}\r\n\r\n").encode()
        self.wfile.write(head + body)

    def do_GET(self):
        with lock:
            self.reply(json.dumps(counts).encode(), "application/json")

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        messages = body.get("messages", [])
        users = [json.dumps(m.get("content")) for m in messages if m.get("role") == "user"]
        tools = [m for m in messages if m.get("role") == "tool"]
        if users and "SPAWN-BENCH" in users[-1] and not tools:
            kind, answer = "spawn", spawns()
        elif any("[Subagent task from" in u for u in users):
            kind, answer = "child", text("CHILD-OK")
        else:
            kind, answer = "other", text("NO_REPLY")
        with lock:
            counts[kind] += 1
        self.reply(answer, "text/event-stream")

    def log_message(self, *a):
        pass


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


s = S(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
