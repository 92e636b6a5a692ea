"""scripts/bench-attribution's body: one culprit class at a time is injected on the CPU of a
JACK client (a Python client of a private jackd, pinned to one CPU), `xrunlab watch
--forensics` watches the session, and each xrun's named class (`late.class`) is scored
against the injected one: a confusion matrix, with precision and recall per class.

Run it through scripts/bench-attribution (which says what it needs)."""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

RATE, FRAMES = 48000, 128
# One name for every run: a slot JACK's registry kept for it is taken again.
SERVER = "xrl-bench-attribution"

# The test client: busy BUSY of each period; mode `spin` also spins 3 periods every
# EVERY-th cycle (its own work), `fault` touches 128 random pages of a file mapping out of
# the cache, each paged out again after (major faults), `gil` keeps a second, normal thread of
# the process busy in Python (the process callback waits for the interpreter lock it holds).
CLIENT = r"""
import jack, mmap, os, random, sys, threading, time
mode, busy, every, path = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
period = float(sys.argv[5])
c = jack.Client("xrl-attr", no_start_server=True)
n = [0]
tid = [0]
m = None
if mode == "fault":
    f = open(path, "rb")
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_RANDOM)
    pages = len(m) // mmap.PAGESIZE
# Linux 5.4's MADV_PAGEOUT, which Debian 12's Python does not name.
PAGEOUT = getattr(mmap, "MADV_PAGEOUT", 21)
def process(frames):
    if not tid[0]:
        tid[0] = threading.get_native_id()
    n[0] += 1
    t = time.perf_counter()
    while time.perf_counter() - t < busy * period:
        pass
    if mode == "spin" and n[0] % every == 0:
        while time.perf_counter() - t < 3 * period:
            pass
    if mode == "fault" and n[0] % every == 0:
        s = 0
        for _ in range(128):
            off = random.randrange(pages) * mmap.PAGESIZE
            s += m[off]
            # Paged out again (clean: dropped from the cache), so that a later touch
            # reads it in again.
            m.madvise(PAGEOUT, off, mmap.PAGESIZE)
c.set_process_callback(process)
c.activate()
if mode == "gil":
    def hold():
        while True:
            t = time.perf_counter()
            while time.perf_counter() - t < 0.006:
                pass
            time.sleep(0.1)
    threading.Thread(target=hold, daemon=True).start()
while not tid[0]:
    time.sleep(0.01)
print("tid", tid[0], flush=True)
sys.stdin.read()
c.deactivate()
c.close()
"""

SPIN = "import time\nwhile True:\n    pass\n"
BURST = ("import time\nwhile True:\n    t = time.perf_counter()\n"
         "    while time.perf_counter() - t < 0.008:\n        pass\n    time.sleep(0.25)\n")
# Injected class -> the classes that name it rightly (a writeback burst is its kernel
# threads, or the writer's own time in a kernel section that cannot be preempted).
EXPECT = {
    "none": {"hypervisor"},
    "plugin": {"own-work"},
    "fifo-burst": {"rt-task"},
    "irq-flood": {"interrupt"},
    "writeback": {"kernel-thread", "kernel-section"},
    "page-faults": {"blocked-io"},
    "rt-throttling": {"rt-throttled"},
    "not-realtime": {"not-realtime"},
    "inversion": {"lock"},
    "cpu-quota": {"cpu-quota"},
}
NAMED = ["own-work", "rt-task", "interrupt", "kernel-thread", "kernel-section", "blocked-io",
         "lock", "rt-throttled", "not-realtime", "cpu-quota", "hypervisor", "unaccounted"]


class Bench:
    def __init__(self, args):
        self.a = args
        self.kids = []
        self.restore = []

    def spawn(self, argv, **kw):
        p = subprocess.Popen(argv, start_new_session=True, **kw)
        self.kids.append(p)
        return p

    def pinned(self, code, *args, fifo=None):
        argv = ["taskset", "-c", str(self.a.cpu)]
        if fifo:
            argv = ["chrt", "-f", str(fifo)] + argv
        return self.spawn(argv + [sys.executable, "-c", code, *map(str, args)],
                          stdout=subprocess.DEVNULL)

    def stop_all(self):
        # SIGTERM first, jackd last: a jackd killed outright leaves its slot in JACK's
        # shared registry (8 slots) and its semaphores in /dev/shm.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in reversed(self.kids):
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, sig)
                    except ProcessLookupError:
                        pass
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        self.kids.clear()
        for f in reversed(self.restore):
            try:
                f()
            except OSError as e:
                print(f"bench-attribution: restoring: {e}", file=sys.stderr)
        self.restore.clear()

    def write(self, path, value):
        old = open(path).read().strip()
        open(path, "w").write(value)
        self.restore.append(lambda: open(path, "w").write(old))

    def normal(self, tid):
        """The client's process thread made SCHED_OTHER (jackd made it FIFO)."""
        os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))

    def quota(self, pid):
        """The client's process moved into a cgroup whose CPU quota is 15 % of a CPU."""
        v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
        base = "/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/cpu"
        d = tempfile.mkdtemp(prefix="xrl-attr-", dir=base)
        old = open(f"/proc/{pid}/cgroup").read()
        if v2:
            open(f"{d}/cpu.max", "w").write("3000 20000")
        else:
            open(f"{d}/cpu.cfs_period_us", "w").write("20000")
            open(f"{d}/cpu.cfs_quota_us", "w").write("3000")
        prev = None
        for line in old.splitlines():
            i, ctrl, path = line.split(":", 2)
            if (v2 and i == "0") or (not v2 and "cpu" in ctrl.split(",")):
                prev = base + path
        def back():
            for t in os.listdir(f"/proc/{pid}/task") if os.path.exists(f"/proc/{pid}") else []:
                try:
                    open(f"{prev}/cgroup.procs" if v2 else f"{prev}/tasks", "w").write(t)
                except OSError:
                    pass
            os.rmdir(d)
        self.restore.append(back)
        open(f"{d}/cgroup.procs", "w").write(str(pid))

    def run_class(self, cls, out):
        a = self.a
        name = SERVER
        env = dict(os.environ, JACK_DEFAULT_SERVER=name, JACK_NO_START_SERVER="1",
                   JACK_NO_AUDIO_RESERVATION="1")
        other = "0" if a.cpu != 0 else "1"
        jack_log = open(f"{out}/{cls}.jackd.log", "w")
        frames = a.irq_frames if cls == "irq-flood" else FRAMES
        self.spawn(["taskset", "-c", other, "jackd", "-n", name, "-P", "85", "-d", "dummy",
                    "-r", str(RATE), "-p", str(frames)], env=env, stdout=jack_log,
                   stderr=subprocess.STDOUT)
        for _ in range(100):
            r = subprocess.run(["jack_wait", "-c", "-s", name], env=env, capture_output=True,
                               text=True)
            if r.stdout.strip() == "running":
                break
            time.sleep(0.1)
        else:
            raise SystemExit(f"bench-attribution: jackd '{name}' did not start (see {out}/{cls}.jackd.log)")
        mode = {"plugin": "spin", "page-faults": "fault", "inversion": "gil"}.get(cls, "base")
        cold = f"{out}/cold.bin"
        if mode == "fault" and not os.path.exists(cold):
            with open(cold, "wb") as f:
                f.truncate(0)
                chunk = os.urandom(1 << 20)
                for _ in range(256):
                    f.write(chunk)
                # Written back, so that the cache can be dropped (dirty pages cannot).
                f.flush()
                os.fsync(f.fileno())
        if mode == "fault":
            # Out of the cache: every page the client touches is read in (a major fault).
            subprocess.run(["dd", f"if={cold}", "iflag=nocache", "count=0"],
                           stderr=subprocess.DEVNULL, check=False)
        every = {"spin": 40, "fault": 40}.get(mode, 0)
        # Interrupts on this VM hold a CPU for well under a millisecond at a time: a client
        # with less slack shows them.
        # A normal-priority client beside a hog is woken ahead of it (EEVDF's lag): with
        # more of its period busy it meets the hog's slices more often.
        busy = {"irq-flood": max(a.busy, 0.8), "not-realtime": max(a.busy, 0.6)}.get(cls, a.busy)
        client = self.spawn(["taskset", "-c", str(a.cpu), sys.executable, "-c", CLIENT, mode,
                             str(busy), str(every), cold, str(frames / RATE)], env=env,
                            stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
        line = client.stdout.readline().split()
        if len(line) != 2 or line[0] != "tid":
            raise SystemExit("bench-attribution: the test client did not start (python3-jack-client?)")
        tid = int(line[1])
        watch = self.spawn([a.xrunlab, "watch", "--server", f"jack:{name}", "--forensics",
                            "--duration", f"{a.duration}s", "-q", "-o", f"{out}/{cls}.json"],
                           env=env)
        time.sleep(2)
        if cls == "fifo-burst":
            self.pinned(BURST, fifo=90)
        elif cls == "irq-flood":
            # Flood pings of 60 kB on loopback, sent from the other CPU, their receive
            # steered to the client's (RPS on lo; restored after): each echo and its reply
            # are handled in the NET_RX softirq there, whatever runs, with no sender task
            # on that CPU to hold it in a kernel section instead.
            self.write("/sys/class/net/lo/queues/rx-0/rps_cpus", format(1 << a.cpu, "x"))
            for _ in range(3):
                self.spawn(["taskset", "-c", other, "ping", "-f", "-q", "-s", "60000",
                            "127.0.0.1"], stdout=subprocess.DEVNULL)
        elif cls == "writeback":
            self.spawn(["taskset", "-c", str(a.cpu), "sh", "-c",
                        f"while :; do dd if=/dev/zero of={out}/wb.bin bs=1M count=64 "
                        f"2>/dev/null; sync; done"])
        elif cls == "rt-throttling":
            self.write("/proc/sys/kernel/sched_rt_runtime_us", "700000")
            self.pinned(SPIN, fifo=10)
        elif cls == "not-realtime":
            self.normal(tid)
            self.pinned(SPIN)
        elif cls == "inversion":
            self.pinned(SPIN)
        elif cls == "cpu-quota":
            self.normal(tid)
            self.quota(client.pid)
        watch.wait()
        client.stdin.close()
        self.stop_all()
        for f in (f"{out}/wb.bin",):
            if os.path.exists(f):
                os.remove(f)
        return watch.returncode


def score(out, classes):
    rows = {}
    for cls in classes:
        try:
            d = json.load(open(f"{out}/{cls}.json"))["results"]
        except (OSError, ValueError, KeyError):
            rows[cls] = None
            continue
        n = {}
        for x in d.get("xruns", []):
            late = x.get("late")
            if late is not None and "class" not in late:
                # Past the windows the forensics explain (the first 1000): not scored.
                continue
            k = (late or {}).get("class") or "unaccounted"
            n[k] = n.get(k, 0) + 1
        rows[cls] = n
    return rows


def report(rows, classes):
    cols = [c for c in NAMED if any((r or {}).get(c) for r in rows.values())] or ["unaccounted"]
    w = max(len(c) for c in cols + list(classes)) + 1
    lines = ["injected \\ named".ljust(15) + "".join(c.rjust(w) for c in cols) + "  xruns  top-1"]
    totals = {c: 0 for c in NAMED}
    right = {c: 0 for c in NAMED}
    for cls in classes:
        r = rows[cls]
        if r is None:
            lines.append(f"{cls:15}" + "  (no result)")
            continue
        n = sum(r.values())
        ok = sum(v for k, v in r.items() if k in EXPECT[cls])
        for k, v in r.items():
            totals[k] = totals.get(k, 0) + v
            if k in EXPECT[cls]:
                right[k] = right.get(k, 0) + v
        top = f"{100 * ok / n:5.1f} %" if n else "    —"
        lines.append(f"{cls:15}" + "".join(str(r.get(c, 0)).rjust(w) for c in cols)
                     + f"{n:7d}  {top}")
    lines.append("")
    lines.append("per class: recall (xruns of the injected class named rightly) and precision "
                 "(names of that class that were right)")
    for cls in classes:
        r = rows[cls]
        if r is None:
            continue
        n = sum(r.values())
        ok = sum(v for k, v in r.items() if k in EXPECT[cls])
        named = sum(totals.get(k, 0) for k in EXPECT[cls])
        good = sum(right.get(k, 0) for k in EXPECT[cls])
        rec = f"{100 * ok / n:.1f} %" if n else "—"
        prec = f"{100 * good / named:.1f} %" if named else "—"
        lines.append(f"  {cls:15} recall {rec:>8} of {n:4d}   precision {prec:>8} of {named:4d}"
                     f"   ({' or '.join(sorted(EXPECT[cls]))})")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(prog="bench-attribution")
    p.add_argument("out")
    p.add_argument("--duration", type=int, default=40)
    p.add_argument("--classes", default=",".join(EXPECT))
    p.add_argument("--cpu", type=int, default=1)
    p.add_argument("--busy", type=float, default=0.4)
    p.add_argument("--irq-frames", type=int, default=128)
    p.add_argument("--xrunlab", default="target/release/xrunlab")
    p.add_argument("--score-only", action="store_true")
    a = p.parse_args()
    classes = [c for c in a.classes.split(",") if c]
    for c in classes:
        if c not in EXPECT:
            print(f"bench-attribution: unknown class '{c}' (one of {', '.join(EXPECT)})",
                  file=sys.stderr)
            sys.exit(2)
    os.makedirs(a.out, exist_ok=True)
    if not a.score_only:
        b = Bench(a)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: (b.stop_all(), sys.exit(130)))
        for c in classes:
            print(f"bench-attribution: {c} ({a.duration} s)", file=sys.stderr, flush=True)
            try:
                b.run_class(c, a.out)
            finally:
                b.stop_all()
    text = report(score(a.out, classes), classes)
    open(f"{a.out}/summary.txt", "w").write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
