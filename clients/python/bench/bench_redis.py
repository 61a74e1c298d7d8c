#!/usr/bin/python3
"""The Python client next to redis-py on Redis over its Unix socket (issue 22).

    /usr/bin/python3 clients/python/bench/bench_redis.py [--eventbusd PATH] [--count N] [--reps R]

(a) publish: N events of 64 B (eventbus: ``data`` a 62-character JSON string,
    64 bytes of JSON; Redis: a 64-byte message) without waiting for each
    answer: ``publish(wait=False)`` inside ``bus.batch()`` then ``flush()``,
    against redis-py's ``pipeline(transaction=False)`` of PUBLISH then
    ``execute()`` (both read every answer). No subscriber. Also shown:
    eventbus ``publish(wait=False)`` without ``batch()`` (one write each).
(b) receive: a publisher process (same client library, pipelined as in (a))
    sends N events while this process counts them in a plain ``for ev in
    sub:`` loop / ``for m in pubsub.listen():``; (b') the same loops over
    N events published (and queued) before the loop starts; (b'') live
    again, from a publisher far faster than Python (the eventbus CLI's
    ``publish --lines``, ``redis-cli --pipe``), when ``--cli`` exists. Rate = events received /
    time from the first to the last. Losses: the broker's ``dropped``
    notices (eventbus; a 1.1 broker drops for a slow subscriber under the
    default ``drop-new``, a 1.2 one holds the publisher instead); Redis drops
    nothing until its pubsub output buffer limit (32 MB) disconnects.

Each measurement runs against a fresh broker of each kind, alternately
(eventbus, redis, eventbus, ...), R times; medians are printed as a
Markdown table. Needs Debian's python3-redis and redis-server.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

PAYLOAD_JSON = "x" * 62          # 64 bytes as JSON
PAYLOAD_REDIS = b"x" * 64


def wait_for_socket(path, process, what):
    deadline = time.monotonic() + 10
    import socket
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited at start")
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
                return
        except OSError:
            time.sleep(0.01)
    raise SystemExit(f"{what} did not start")


class Servers:
    def __init__(self, eventbusd):
        self.dir = tempfile.mkdtemp(prefix="ebbench.", dir="/tmp")
        self.eventbusd = eventbusd
        self.procs = []

    def eventbus(self, *options):
        path = os.path.join(self.dir, f"bus{len(self.procs)}.sock")
        p = subprocess.Popen([self.eventbusd, "--socket", path, *options], stderr=subprocess.DEVNULL)
        self.procs.append(p)
        wait_for_socket(path, p, "eventbusd")
        return path, p

    def redis(self):
        path = os.path.join(self.dir, f"redis{len(self.procs)}.sock")
        p = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", path, "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        wait_for_socket(path, p, "redis-server")
        return path, p

    def stop(self, p):
        p.terminate()
        p.wait(10)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# -- (a) publishing ----------------------------------------------------------

def publish_eventbus(path, n, batch=True):
    import eventbus
    with eventbus.connect(path) as bus:
        start = time.perf_counter()
        if batch:
            with bus.batch():
                for _ in range(n):
                    bus.publish("bench.a", PAYLOAD_JSON, wait=False)
        else:
            for _ in range(n):
                bus.publish("bench.a", PAYLOAD_JSON, wait=False)
        bus.flush()
        return n / (time.perf_counter() - start)


def publish_redis(path, n):
    import redis
    r = redis.Redis(unix_socket_path=path)
    r.ping()
    start = time.perf_counter()
    pipe = r.pipeline(transaction=False)
    for _ in range(n):
        pipe.publish("bench.a", PAYLOAD_REDIS)
    pipe.execute()
    rate = n / (time.perf_counter() - start)
    r.close()
    return rate


# -- (b) receiving -------------------------------------------------------------

def publisher_process(kind, path, n, once):
    """Run as a child: publishes n events, then the end marker every 20 ms
    until killed (an end marker can be dropped like any event), or once and
    exits (``once``)."""
    if kind == "eventbus":
        import eventbus
        bus = eventbus.connect(path)
        with bus.batch():
            for _ in range(n):
                bus.publish("bench.b", PAYLOAD_JSON, wait=False)
        bus.flush()
        while True:
            bus.publish("bench.end")
            if once:
                return
            time.sleep(0.02)
    else:
        import redis
        r = redis.Redis(unix_socket_path=path)
        pipe = r.pipeline(transaction=False)
        for _ in range(n):
            pipe.publish("bench.b", PAYLOAD_REDIS)
        pipe.execute()
        while True:
            r.publish("bench.end", b"")
            if once:
                return
            time.sleep(0.02)


def start_publisher(kind, path, n, once=False):
    process = subprocess.Popen([sys.executable, __file__, "--publisher", kind, path, str(n), "once" if once else "loop"],
                               start_new_session=True)
    if once:
        process.wait()
    return process


def start_native_publisher(kind, path, n, directory, cli):
    """A publisher in C or Swift, far faster than a Python one: the eventbus
    CLI's ``publish --lines`` / ``redis-cli --pipe``, then the end marker
    every 20 ms until killed."""
    lines = os.path.join(directory, f"{kind}-{n}.in")
    if not os.path.exists(lines):
        with open(lines, "wb") as f:
            if kind == "eventbus":
                f.write((PAYLOAD_JSON + "\n").encode() * n)
            else:
                command = b"*3\r\n$7\r\nPUBLISH\r\n$7\r\nbench.b\r\n$64\r\n" + PAYLOAD_REDIS + b"\r\n"
                f.write(command * n)
    if kind == "eventbus":
        script = (f'"{cli}" --socket "{path}" publish --lines bench.b < "{lines}" && '
                  f'while :; do "{cli}" --socket "{path}" publish bench.end; sleep 0.02; done')
    else:
        script = (f'redis-cli -s "{path}" --pipe < "{lines}" > /dev/null && '
                  f'while :; do redis-cli -s "{path}" publish bench.end "" > /dev/null; sleep 0.02; done')
    return subprocess.Popen(["sh", "-c", script], start_new_session=True)


def stop_publisher(process):
    # Every publisher leads its own session (start_new_session), so its shell's children go too.
    try:
        os.killpg(process.pid, 9)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def receive_eventbus(path, n, drained=False, native=None):
    import eventbus
    with eventbus.connect(path, on_notice=lambda notice: None) as bus:
        sub = bus.subscribe("bench.b", "bench.end")
        publisher = start_native_publisher("eventbus", path, n, *native) if native else start_publisher("eventbus", path, n, drained)
        try:
            count, first, last = 0, None, None
            for ev in sub:
                if ev.frame["type"] == "bench.end":
                    break
                count += 1
                if first is None:
                    first = time.perf_counter()
                last = time.perf_counter()
            dropped = sub.dropped
        finally:
            stop_publisher(publisher)
        sub.close()
    return count / (last - first), count, dropped


def receive_redis(path, n, drained=False, native=None):
    import redis
    r = redis.Redis(unix_socket_path=path)
    p = r.pubsub()
    p.subscribe("bench.b", "bench.end")
    p.get_message(timeout=5)
    p.get_message(timeout=5)
    publisher = start_native_publisher("redis", path, n, *native) if native else start_publisher("redis", path, n, drained)
    try:
        count, first, last = 0, None, None
        for m in p.listen():
            if m["type"] != "message":
                continue
            if m["channel"] == b"bench.end":
                break
            count += 1
            if first is None:
                first = time.perf_counter()
            last = time.perf_counter()
    finally:
        stop_publisher(publisher)
    p.close()
    r.close()
    return count / (last - first), count, n - count


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--publisher":
        publisher_process(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "once")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eventbusd", default=os.environ.get("EVENTBUSD") or os.path.join(REPO, ".build/release/eventbusd"))
    parser.add_argument("--cli", default=os.path.join(REPO, ".build/release/eventbus"),
                        help="the eventbus CLI for the fast-publisher case (b''); skipped when missing")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    import redis
    servers = Servers(args.eventbusd)
    native = os.access(args.cli, os.X_OK) and shutil.which("redis-cli")
    results = {k: [] for k in ("pub_eb", "pub_eb_plain", "pub_redis", "recv_eb", "recv_redis", "drain_eb", "drain_redis")
               + (("fast_eb", "fast_redis") if native else ())}
    try:
        for rep in range(args.reps):
            for kind in ("eventbus", "redis"):
                path, p = servers.eventbus() if kind == "eventbus" else servers.redis()
                if kind == "eventbus":
                    results["pub_eb"].append(publish_eventbus(path, args.count))
                    results["pub_eb_plain"].append(publish_eventbus(path, args.count, batch=False))
                else:
                    results["pub_redis"].append(publish_redis(path, args.count))
                servers.stop(p)
            for kind in ("eventbus", "redis"):
                path, p = servers.eventbus() if kind == "eventbus" else servers.redis()
                results["recv_eb" if kind == "eventbus" else "recv_redis"].append(
                    receive_eventbus(path, args.count) if kind == "eventbus" else receive_redis(path, args.count))
                servers.stop(p)
            for kind in ("eventbus", "redis"):
                # Everything queued first (eventbusd with room for all of it), then read.
                path, p = servers.eventbus("--max-outbound", "64M") if kind == "eventbus" else servers.redis()
                results["drain_eb" if kind == "eventbus" else "drain_redis"].append(
                    receive_eventbus(path, args.count, True) if kind == "eventbus" else receive_redis(path, args.count, True))
                servers.stop(p)
            if native:
                for kind in ("eventbus", "redis"):
                    path, p = servers.eventbus() if kind == "eventbus" else servers.redis()
                    results["fast_eb" if kind == "eventbus" else "fast_redis"].append(
                        receive_eventbus(path, args.count, native=(servers.dir, args.cli)) if kind == "eventbus"
                        else receive_redis(path, args.count, native=(servers.dir, args.cli)))
                    servers.stop(p)
            print(f"rep {rep + 1}: " + ", ".join(f"{k} {v[-1] if not isinstance(v[-1], tuple) else v[-1][0]:,.0f}/s"
                                                 for k, v in results.items()), file=sys.stderr)
    finally:
        servers.close()

    def med(key):
        values = results[key]
        return statistics.median(v[0] if isinstance(v, tuple) else v for v in values)

    def losses(key):
        return ", ".join(f"{v[1]:,} received, {v[2]:,} dropped" for v in results[key])

    print(f"python3 {sys.version.split()[0]}, redis-py {redis.__version__}, {args.count:,} events of 64 B, "
          f"{args.reps} alternating runs, medians; eventbusd {args.eventbusd}")
    print()
    print("| case | eventbus (Python client) | redis-py on Redis | ratio |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| (a) publish, pipelined: `batch()` + `publish(wait=False)` + `flush()` vs `pipeline().publish` + `execute()` "
          f"| {med('pub_eb'):,.0f}/s | {med('pub_redis'):,.0f}/s | {med('pub_eb') / med('pub_redis'):.2f}x |")
    print(f"| (a') publish, `publish(wait=False)` one write each, vs the same pipeline "
          f"| {med('pub_eb_plain'):,.0f}/s | {med('pub_redis'):,.0f}/s | {med('pub_eb_plain') / med('pub_redis'):.2f}x |")
    print(f"| (b) receive, `for ev in sub:` vs `for m in pubsub.listen():` "
          f"| {med('recv_eb'):,.0f}/s | {med('recv_redis'):,.0f}/s | {med('recv_eb') / med('recv_redis'):.2f}x |")
    print(f"| (b') receive what was queued before (eventbusd `--max-outbound 64M`), same loops "
          f"| {med('drain_eb'):,.0f}/s | {med('drain_redis'):,.0f}/s | {med('drain_eb') / med('drain_redis'):.2f}x |")
    if native:
        print(f"| (b'') receive, live, from a native publisher (`eventbus publish --lines` / `redis-cli --pipe`) "
              f"| {med('fast_eb'):,.0f}/s | {med('fast_redis'):,.0f}/s | {med('fast_eb') / med('fast_redis'):.2f}x |")
    print()
    if native:
        print(f"Losses in (b''), per run: eventbus: {losses('fast_eb')}; Redis: {losses('fast_redis')}.")
    print(f"Losses in (b), per run: eventbus: {losses('recv_eb')}; Redis: {losses('recv_redis')}.")
    print(f"Losses in (b'), per run: eventbus: {losses('drain_eb')}; Redis: {losses('drain_redis')}.")
    print("Every run: " + "; ".join(f"{k}: " + ", ".join(f"{(v[0] if isinstance(v, tuple) else v):,.0f}" for v in vals)
                                    for k, vals in results.items()))


if __name__ == "__main__":
    main()
