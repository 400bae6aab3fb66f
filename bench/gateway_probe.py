"""Probes the benchmark scripts share to start and watch a gateway.

Imported from the scripts' inline Python (`sys.path` gets `bench/`).
"""
import socket


def free_port():
    """A loopback port nothing listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ready(port):
    """Whether the gateway on `port` answers /readyz with 200."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
    except OSError:
        return False
    try:
        s.sendall(b"GET /readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return data.startswith(b"HTTP/1.1 200")
    except OSError:
        return False
    finally:
        s.close()


def status_kb(pid, field):
    """A memory field of process `pid`'s /proc status in kB (0 once it is
    gone): VmRSS, everything resident; RssAnon, its own (private) part."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kb(pid):
    """Resident memory of process `pid` in kB (0 once it is gone)."""
    return status_kb(pid, "VmRSS")


def private_kb(pid):
    """Private (anonymous resident) memory of process `pid` in kB."""
    return status_kb(pid, "RssAnon")
