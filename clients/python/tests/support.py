"""Test support: a real eventbusd on a temporary socket, and a scripted fake
broker for what a real one never does (partial frames, oversized lines, a
close mid-frame, replies of other shapes).

The real broker is $EVENTBUSD, else the repository's .build/debug/eventbusd.
Without it the real-broker tests are skipped, unless EVENTBUS_REQUIRE_BROKER=1
(scripts/test sets it), which makes them fail.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)                       # clients/python
REPO_ROOT = os.path.dirname(os.path.dirname(PACKAGE_ROOT))
sys.path.insert(0, PACKAGE_ROOT)


def broker_binary():
    path = os.environ.get("EVENTBUSD") or os.path.join(REPO_ROOT, ".build", "debug", "eventbusd")
    if os.access(path, os.X_OK):
        return path
    if os.environ.get("EVENTBUS_REQUIRE_BROKER") == "1":
        raise AssertionError(f"eventbusd not found at {path} (set EVENTBUSD or build it)")
    raise unittest.SkipTest(f"eventbusd not found at {path} (set EVENTBUSD or run swift build --product eventbusd)")


def cli_binary():
    path = os.path.join(os.path.dirname(broker_binary()), "eventbus")
    return path if os.access(path, os.X_OK) else None


class TempDir:
    """A short temporary directory (sun_path holds 108 bytes)."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="ebpy.", dir="/tmp")

    def file(self, name):
        return os.path.join(self.path, name)

    def remove(self):
        shutil.rmtree(self.path, ignore_errors=True)


class Broker:
    """eventbusd on a temporary socket; ready once a ping got its ok."""

    def __init__(self, *args, directory=None):
        self.binary = broker_binary()
        self.own_dir = directory is None
        self.dir = directory or TempDir()
        self.socket = self.dir.file("bus.sock")
        self.args = list(args)
        self.process = None
        self.start()

    def start(self):
        self.stderr = open(self.dir.file("broker.err"), "ab")
        self.process = subprocess.Popen([self.binary, "--socket", self.socket, *self.args],
                                        stdin=subprocess.DEVNULL, stdout=self.stderr, stderr=self.stderr)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.connect(self.socket)
                    s.sendall(b'{"op":"ping","req":1}\n')
                    if b'"ok"' in s.recv(4096):
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"eventbusd did not start: {self.log()}")
            time.sleep(0.01)

    def stop(self, sig=signal.SIGTERM):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        self.stderr.close()

    def restart(self):
        self.stop()
        self.start()

    def log(self):
        try:
            with open(self.dir.file("broker.err"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def close(self):
        self.stop()
        if self.own_dir:
            self.dir.remove()


class BrokerTestCase(unittest.TestCase):
    """One broker per test class (started with ``broker_args``), a fresh
    client per test from ``connect()``."""

    broker_args = ()

    @classmethod
    def setUpClass(cls):
        cls.broker = Broker(*cls.broker_args)

    @classmethod
    def tearDownClass(cls):
        cls.broker.close()

    def connect(self, **options):
        import eventbus
        bus = eventbus.connect(self.broker.socket, **options)
        self.addCleanup(bus.close)
        return bus


# ---------------------------------------------------------------------------
# The fake broker

class FakeConnection:
    """The broker's side of one accepted connection."""

    def __init__(self, sock):
        self.sock = sock
        self.file = sock.makefile("rb")

    def read(self):
        """The next frame the client sent (dict), or None at EOF."""
        line = self.file.readline()
        return json.loads(line) if line else None

    def expect(self, op):
        frame = self.read()
        if frame is None or frame.get("op") != op:
            raise AssertionError(f"expected {op}, got {frame}")
        return frame

    def send(self, data):
        if isinstance(data, dict):
            data = (json.dumps(data) + "\n").encode()
        self.sock.sendall(data)

    def ok(self, request, **fields):
        self.send({"op": "ok", "req": request["req"], **fields})

    def hello(self, **fields):
        """Answers the hello; returns it."""
        frame = self.expect("hello")
        self.ok(frame, server="fake", version="0", protocol=1, instance=fields.pop("instance", "fake-run-1"),
                conn=1, features=fields.pop("features", ["retain", "history"]), **fields)
        return frame

    def subscribe(self, *, current_seq=0, instance="fake-run-1"):
        """Answers the subscribe(s) and the stats a subscription opens with;
        returns the subscribe frames."""
        subscribes = []
        while True:
            frame = self.read()
            if frame["op"] == "subscribe":
                subscribes.append(frame)
                self.ok(frame, type=frame["type"])
            elif frame["op"] == "stats":
                self.ok(frame, instance=instance, history_first_seq=current_seq + 1, history_events=0)
                return subscribes
            else:
                raise AssertionError(f"unexpected {frame}")

    def event(self, seq, type="a.b", data=None, **fields):
        self.send({"op": "event", "seq": seq, "type": type, "time": "2026-11-29T13:00:00.123Z", "source": "fake",
                   "id": f"fake-{seq}", "pid": 1, "uid": 0, "gid": 0, "data": data, **fields})

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.file.close()
        self.sock.close()


class FakeBroker:
    """Listens on a temporary socket and runs ``script(fake)`` on a thread;
    ``accept()`` there gives a `FakeConnection`. ``join()`` re-raises what
    the script raised."""

    def __init__(self, script):
        self.dir = TempDir()
        self.socket = self.dir.file("fake.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.socket)
        self.listener.listen(8)
        self.listener.settimeout(10)
        self.error = None
        self.connections = []
        self.thread = threading.Thread(target=self._run, args=(script,), daemon=True)
        self.thread.start()

    def _run(self, script):
        try:
            script(self)
        except BaseException as exc:    # reported by join()
            self.error = exc

    def accept(self):
        sock, _ = self.listener.accept()
        sock.settimeout(10)
        connection = FakeConnection(sock)
        self.connections.append(connection)
        return connection

    def join(self, timeout=10):
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError("the fake broker's script did not finish")
        if self.error is not None:
            raise self.error

    def close(self):
        for connection in self.connections:
            try:
                connection.close()
            except OSError:
                pass
        self.listener.close()
        self.dir.remove()
