"""A local Telegram Bot API and an instant OpenAI-style model on one port,
for bench/telegram.sh. POST /_push {"chats": N, "messages": M} queues M
direct messages spread over N chats; GET /_stats reports when each was
queued and answered."""
import http.server, json, socketserver, sys, threading, time

TOKEN = "123456:BENCH-token"
lock = threading.Condition()
updates, pushed_at, answered_at = [], {}, {}
next_id = [0]


def chunks():
    parts = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Noted, thanks."}, "finish_reason": None}]},
             {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
             {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}]
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in parts) + "data: [DONE]\n\n").encode()


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One segment per answer and no Nagle delay: the client's delayed ACK
    # would otherwise add ~40 ms to every call, which is not the gateway's.
    disable_nagle_algorithm = True

    def reply(self, status, body, kind="application/json"):
        head = (f"HTTP/1.1 {status} OK\r\ncontent-type: {kind}\r\n"
                f"content-length: {len(body)}\r\n\r\n").encode()
        self.wfile.write(head + body)

    def do_GET(self):
        with lock:
            stats = {"pushed": pushed_at, "answered": answered_at}
        self.reply(200, json.dumps(stats).encode())

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        data = json.loads(body or b"{}")
        path = self.path
        if path.startswith("/v1/"):
            return self.reply(200, chunks(), "text/event-stream")
        if path == "/_push":
            now = time.monotonic()
            with lock:
                for i in range(data["messages"]):
                    next_id[0] += 1
                    uid = next_id[0]
                    chat = 500000 + i % data["chats"]
                    updates.append({"update_id": uid, "message": {
                        "message_id": uid, "date": 1, "chat": {"id": chat, "type": "private"},
                        "from": {"id": chat, "is_bot": False, "first_name": "U"}, "text": f"note {uid}"}})
                    pushed_at[uid] = now
                lock.notify_all()
            return self.reply(200, b"{}")
        method = path.rsplit("/", 1)[-1]
        result = True
        if method == "getMe":
            result = {"id": 4242, "is_bot": True, "first_name": "B", "username": "bench_bot"}
        elif method == "getUpdates":
            offset, wait = data.get("offset", 0), data.get("timeout", 0)
            deadline = time.monotonic() + wait
            with lock:
                while True:
                    found = [u for u in updates if u["update_id"] >= offset][:100]
                    left = deadline - time.monotonic()
                    if found or left <= 0:
                        break
                    lock.wait(left)
            result = found
        elif method == "sendMessage":
            with lock:
                mid = (data.get("reply_parameters") or {}).get("message_id")
                if mid is not None:
                    answered_at.setdefault(mid, time.monotonic())
            result = {"message_id": 1, "date": 1, "chat": {"id": 1}}
        self.reply(200, json.dumps({"ok": True, "result": result}).encode())

    def log_message(self, *a):
        pass


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


s = S(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
