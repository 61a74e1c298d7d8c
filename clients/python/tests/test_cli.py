"""``python3 -m eventbus publish|listen`` against the real eventbusd, and its
socket resolution and messages next to the Swift CLI's."""

import os
import re
import subprocess
import sys
import unittest

import support


def run(*args, env=None, input=None, timeout=20):
    environment = {k: v for k, v in os.environ.items() if k not in ("EVENTBUS_SOCKET", "XDG_RUNTIME_DIR")}
    environment.update(env or {})
    environment["PYTHONPATH"] = support.PACKAGE_ROOT
    return subprocess.run([sys.executable, "-m", "eventbus", *args], env=environment, input=input,
                          capture_output=True, timeout=timeout)


class CommandLineTests(support.BrokerTestCase):
    def test_listen_prints_what_publish_sends(self):
        env = {"EVENTBUS_SOCKET": self.broker.socket}
        listener = subprocess.Popen([sys.executable, "-m", "eventbus", "listen", "-n", "3", "--format", "data", "c.>"],
                                    env={**os.environ, **env, "PYTHONPATH": support.PACKAGE_ROOT},
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(listener.kill)
        with self.connect() as bus:
            while not any("c.>" in c["patterns"] for c in bus.clients()):
                pass
        published = run("publish", "-p", "c.one", '{"n": 1}', env=env)
        self.assertEqual(published.returncode, 0, published.stderr)
        self.assertRegex(published.stdout.decode(), r"^\d+\n$")
        self.assertEqual(run("publish", "--lines", "c.line", env=env, input=b"a\nb\n").returncode, 0)
        out, err = listener.communicate(timeout=20)
        self.assertEqual((listener.returncode, out.decode()), (0, '{"n":1}\n"a"\n"b"\n'), err)

    def test_bus_options_after_the_command_as_the_swift_cli_takes_them(self):
        for flag in ("--socket", "-s"):
            published = run("publish", flag, self.broker.socket, "c.after", "1")
            self.assertEqual(published.returncode, 0, published.stderr)
        both = run("--system", "publish", "--socket", self.broker.socket, "c.after", "1")
        self.assertEqual((both.returncode, both.stderr.decode()), (64, "eventbus: give only one of --socket, --system and --user\n"))
        missing = run("listen", "--socket", self.broker.dir.file("none.sock"), "c.>")
        self.assertEqual(missing.returncode, 69, missing.stderr)
        self.assertIn(self.broker.dir.file("none.sock"), missing.stderr.decode())

    def test_exit_statuses(self):
        env = {"EVENTBUS_SOCKET": self.broker.socket}
        self.assertEqual(run("publish", "eventbus.mine", env=env).returncode, 77)
        self.assertEqual(run("publish", "c.x", "{bad", env=env).returncode, 65)
        self.assertEqual(run("publish", "c.>", env=env).returncode, 64)
        self.assertEqual(run("listen", "-t", "0.1", "c.never", env=env).returncode, 124)
        missing = run("listen", env={"EVENTBUS_SOCKET": self.broker.dir.file("none.sock")})
        self.assertEqual(missing.returncode, 69)
        self.assertTrue(missing.stderr.decode().startswith(f"eventbus: cannot connect to the broker at {self.broker.dir.file('none.sock')}: "))


class SameResolutionAsTheSwiftCLI(unittest.TestCase):
    """Both name the same path when no broker answers, for each way of choosing it."""

    def test_each_choice_resolves_to_the_same_path_and_message(self):
        cli = support.cli_binary()
        if cli is None:
            self.skipTest("the Swift CLI is not built (swift build --product eventbus)")
        scratch = support.TempDir()
        self.addCleanup(scratch.remove)
        runtime = scratch.file("run")
        os.mkdir(runtime)
        cases = [
            ([], {"XDG_RUNTIME_DIR": runtime}),
            (["--user"], {"XDG_RUNTIME_DIR": runtime, "EVENTBUS_SOCKET": scratch.file("env.sock")}),
            ([], {"XDG_RUNTIME_DIR": runtime, "EVENTBUS_SOCKET": scratch.file("env.sock")}),
            (["--socket", scratch.file("flag.sock")], {"EVENTBUS_SOCKET": scratch.file("env.sock")}),
        ]
        for flags, env in cases:
            environment = {k: v for k, v in os.environ.items() if k not in ("EVENTBUS_SOCKET", "XDG_RUNTIME_DIR")}
            environment.update(env)
            theirs = subprocess.run([cli, *flags, "publish", "x.y", "1"], env=environment, capture_output=True, timeout=20)
            ours = run(*flags, "publish", "x.y", "1", env=env)
            self.assertEqual((ours.returncode, theirs.returncode), (69, 69), (flags, env))
            path = lambda out: re.match(r"eventbus: cannot connect to the broker at (\S+):", out.decode()).group(1)
            self.assertEqual(path(ours.stderr), path(theirs.stderr), (flags, env))
            self.assertEqual(ours.stderr.decode(), theirs.stderr.decode(), (flags, env))


if __name__ == "__main__":
    unittest.main()
