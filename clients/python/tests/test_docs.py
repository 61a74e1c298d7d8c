"""The examples of docs/PYTHON.md run as a newcomer would paste them, against
the real eventbusd: the request/reply service and its caller, and the worker
pool (three workers, SIGTERM, each job done once)."""

import os
import re
import signal
import subprocess
import sys
import unittest

import support

import eventbus

DOC = os.path.join(support.REPO_ROOT, "docs", "PYTHON.md")

# Put before an example: says "ready" once it serves, or (a worker) once it
# has set its SIGTERM handler, after subscribing (so the test knows when to
# go on), and gives the worker its make_thumbnail.
PRELUDE = '''
import eventbus
import signal
def _ready(method):
    def wrapper(*args, **kwargs):
        result = method(*args, **kwargs)
        print("ready", flush=True)
        return result
    return wrapper
eventbus.Bus.serve = _ready(eventbus.Bus.serve)
signal.signal = _ready(signal.signal)
def make_thumbnail(path):
    print("thumb", path, flush=True)
'''


def example(needle):
    with open(DOC) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    found = [block for block in blocks if needle in block]
    assert len(found) == 1, f"one example with {needle!r} in docs/PYTHON.md"
    return found[0]


class DocExampleTests(support.BrokerTestCase):
    def run_example(self, code):
        env = dict(os.environ, EVENTBUS_SOCKET=self.broker.socket, PYTHONPATH=support.PACKAGE_ROOT,
                   PYTHONDONTWRITEBYTECODE="1")
        process = subprocess.Popen([sys.executable, "-c", PRELUDE + code], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: process.poll() is None and (process.kill(), process.wait()))
        self.addCleanup(process.stdout.close)
        self.addCleanup(process.stderr.close)
        return process

    def started(self, code):
        process = self.run_example(code)
        self.assertEqual(process.stdout.readline(), "ready\n", process.stderr.read() if process.poll() is not None else "")
        return process

    def test_the_service_and_the_caller(self):
        caller = example('bus.request("disk.usage"')
        before = self.run_example(caller)
        out, err = before.communicate(timeout=60)
        self.assertEqual((before.returncode, err.strip()), (1, "nothing serves disk.usage: start disk_usage.py"))
        service = self.started(example('bus.serve("disk.usage")'))
        after = self.run_example(caller)
        out, err = after.communicate(timeout=60)
        self.assertEqual(after.returncode, 0, err)
        found = re.fullmatch(r"(\d+) bytes free; answered by pid (\d+) uid (\d+)\n", out)
        self.assertIsNotNone(found, out)
        self.assertEqual((int(found.group(2)), int(found.group(3))), (service.pid, os.getuid()))
        with self.assertRaises(eventbus.ServiceError) as raised:
            self.connect().request("disk.usage", {"path": "/nonexistent/x"}, timeout=30)
        self.assertIn("cannot measure", raised.exception.message)

    def test_the_worker_pool_does_each_job_once_and_its_workers_leave_on_sigterm(self):
        code = example('group="thumbnailers"')
        workers = [self.started(code) for _ in range(3)]
        bus = self.connect()
        paths = [f"/photos/{i}.jpg" for i in range(12)]
        for path in paths:
            bus.publish("thumb.requested", {"path": path})
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        done = []
        for worker in workers:
            out, err = worker.communicate(timeout=60)
            self.assertEqual(worker.returncode, 0, err)
            done.append([line.split(" ", 1)[1] for line in out.splitlines()])
        self.assertEqual(sorted(sum(done, [])), sorted(paths), "each job once, none lost at the SIGTERM")
        self.assertTrue(all(done), "every worker had its turn")


if __name__ == "__main__":
    unittest.main()
