"""What scripts/bench-endpoint and scripts/hostile-pass do to `watch --metrics`: a private
jackd -d dummy to watch, a watch serving metrics, normal scrapes, and abusive clients."""
import os
import signal
import socket
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exchange(port, request, timeout=10.0, shut_write=False):
    """(seconds, response bytes) for one request; the response is b"" when refused or reset."""
    t = time.monotonic()
    data = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(request)
            if shut_write:
                s.shutdown(socket.SHUT_WR)
            while True:
                s.settimeout(max(0.1, timeout - (time.monotonic() - t)))
                b = s.recv(65536)
                if not b:
                    break
                data += b
    except OSError:
        pass
    return time.monotonic() - t, data


def scrape(port, timeout=10.0):
    """Seconds until a whole 200 response came, or None (timeout, refused, not 200)."""
    took, data = exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", timeout)
    return took if data.startswith(b"HTTP/1.1 200") and took < timeout else None


class Slowloris:
    """n connections, each sending one byte a second (every `every` s) of a never-ending head;
    idle=True sends nothing at all."""

    def __init__(self, port, n, every=1.0, idle=False):
        self.socks, self.stop = [], threading.Event()
        for _ in range(n):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                s.setblocking(False)
                self.socks.append(s)
            except OSError:
                pass
        self.every, self.idle = every, idle
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        msg = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 100000
        i = 0
        while not self.stop.wait(self.every):
            if self.idle:
                continue
            for s in self.socks:
                try:
                    s.send(msg[i:i + 1])
                except OSError:
                    pass
            i += 1

    def close(self):
        self.stop.set()
        self.t.join()
        for s in self.socks:
            s.close()


class Jackd:
    """A private jackd -d dummy at 48000/256; JACK clients of this process find it."""

    def __init__(self):
        self.name = "xrl-http-%d" % os.getpid()
        os.environ.update(JACK_NO_START_SERVER="1", JACK_NO_AUDIO_RESERVATION="1")
        self.p = subprocess.Popen(["jackd", "-n", self.name, "-d", "dummy", "-r", "48000",
                                   "-p", "256"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        for _ in range(100):
            r = subprocess.run(["jack_wait", "-c", "-s", self.name], capture_output=True,
                               text=True)
            if r.stdout.strip() == "running":
                return
            time.sleep(0.1)
        self.close()
        raise RuntimeError("jackd did not come up in 10 s")

    def close(self):
        self.p.terminate()
        self.p.wait()


class Watch:
    """`xrunlab watch --metrics` of the server, serving once this returns."""

    def __init__(self, binary, server, out):
        self.port, self.out = free_port(), out
        self.p = subprocess.Popen([binary, "-q", "watch", "--server", "jack:" + server,
                                   "--metrics", "127.0.0.1:%d" % self.port, "-o", out],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, start_new_session=True)
        t = time.monotonic()
        while scrape(self.port, 1.0) is None:
            if time.monotonic() - t > 10 or self.p.poll() is not None:
                self.p.kill()
                raise RuntimeError("the watch did not serve: %s" % self.p.stderr.read().decode())
            time.sleep(0.1)

    def interrupt(self, second_after=3.0, bound=20.0):
        """SIGINT; a second one after `second_after` s if it still runs. Returns (seconds to
        exit or None when killed at `bound`, whether the second was sent, rc, result written)."""
        t0 = time.monotonic()
        self.p.send_signal(signal.SIGINT)
        second = False
        try:
            self.p.wait(second_after)
        except subprocess.TimeoutExpired:
            second = True
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(bound)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                return None, second, None, os.path.exists(self.out)
        return time.monotonic() - t0, second, self.p.returncode, os.path.exists(self.out)
