"""Request/reply (PROTOCOL.md 1.3) through the Python client, blocking and
asyncio, against the real eventbusd: a service on one bus, a caller on
another, every way a question can end."""

import asyncio
import os
import threading
import time
import unittest

import support

import eventbus
import eventbus.aio


class RequestReplyTests(support.BrokerTestCase):
    def serve(self, bus, pattern, handler, **options):
        """A Service of ``bus`` answering with ``handler(req)`` on a thread of its own."""
        service = bus.serve(pattern, **options)
        thread = threading.Thread(target=lambda: [handler(req) for req in service], daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(service.close)
        return service

    def test_a_request_gets_the_services_reply_with_the_servers_credentials(self):
        server, caller = self.connect(client="svc"), self.connect()
        seen = []
        self.serve(server, "r1.>", lambda req: seen.append(req) or req.reply({"sum": sum(req.data), "type": req.type}))
        answer = caller.request("r1.add", [1, 2, 3], timeout=10)
        self.assertEqual(answer.data, {"sum": 6, "type": "r1.add"})
        self.assertEqual((answer.pid, answer.uid, answer.gid), (os.getpid(), os.getuid(), os.getgid()))
        self.assertIsNotNone(answer.time.tzinfo)
        self.assertIsInstance(answer.seq, int)
        request = seen[0]
        self.assertEqual((request.seq, request.pid, request.data), (answer.seq, os.getpid(), [1, 2, 3]))
        self.assertTrue(0 < request.timeout <= 10)

    def test_nobody_serving_is_no_responders_before_the_timeout(self):
        caller = self.connect()
        started = time.monotonic()
        with self.assertRaises(eventbus.NoResponders) as raised:
            caller.request("r2.nobody", timeout=120)
        self.assertLess(time.monotonic() - started, 60, "told at once, not at the deadline")
        self.assertEqual(raised.exception.code, "no_responders")
        with self.connect().subscribe("r2.>"):                  # a plain subscription does not serve
            self.assertRaises(eventbus.NoResponders, caller.request, "r2.nobody", timeout=120)

    def test_a_service_failure_is_a_service_error_with_the_services_text(self):
        server, caller = self.connect(), self.connect()
        accepted, answered = [], threading.Event()
        self.serve(server, "r3.>", lambda req: accepted.append(req.fail("disk full: /var")) or answered.set())
        with self.assertRaises(eventbus.ServiceError) as raised:
            caller.request("r3.x", timeout=10)
        self.assertEqual(raised.exception.message, "disk full: /var")
        self.assertEqual(raised.exception.reply.get("pid"), os.getpid())
        self.assertTrue(answered.wait(10))
        self.assertEqual(accepted, [True])

    def test_a_deadline_is_a_request_timeout_and_the_late_reply_is_not_accepted(self):
        server, caller = self.connect(), self.connect()
        service = server.serve("r4.>")
        with self.assertRaises(eventbus.RequestTimeout) as raised:
            caller.request("r4.slow", timeout=0.05)
        self.assertIsInstance(raised.exception, TimeoutError)
        late = service.get(10)
        self.assertIs(late.reply("too late"), False, "refused, told by the return value, no exception")
        self.assertEqual(service.unaccepted, 1)
        service.close()

    def test_a_service_that_goes_away_without_answering_is_no_reply(self):
        server, caller = self.connect(), self.connect()
        service = server.serve("r5.>")
        outcome = []
        asker = threading.Thread(target=lambda: outcome.append(self.ask(caller, "r5.x")))
        asker.start()
        self.assertIsNotNone(service.get(10))
        service.close()
        asker.join(30)
        self.assertEqual([type(e) for e in outcome], [eventbus.NoReply])

    @staticmethod
    def ask(bus, type, data=None):
        try:
            return bus.request(type, data, timeout=60)
        except eventbus.EventBusError as exc:
            return exc

    def test_requests_of_several_threads_are_in_flight_at_once_and_answered_out_of_order(self):
        server, caller = self.connect(), self.connect()
        n = 6
        service = server.serve("r6.>")
        results = [None] * n
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, self.ask(caller, "r6.x", i))) for i in range(n)]
        for thread in threads:
            thread.start()
        requests = [service.get(10) for _ in range(n)]      # all in flight at once on one bus
        for request in reversed(requests):                   # answered last first
            self.assertTrue(request.reply(request.data * 10))
        for thread in threads:
            thread.join(30)
        self.assertEqual([r.data for r in results], [i * 10 for i in range(n)])
        service.close()

    def test_leave_finishes_the_requests_held_then_unsubscribes_and_those_not_taken_get_no_reply(self):
        server, caller = self.connect(), self.connect()
        service = server.serve("r8.>")
        results = {}

        def ask(name):
            thread = threading.Thread(target=lambda: results.__setitem__(name, self.ask(caller, "r8.x", name)))
            thread.start()
            self.addCleanup(thread.join, 30)
            return thread
        first = ask("held")
        held = service.get(10)
        service.leave()                                    # as a worker's SIGTERM handler would
        second = ask("not taken")                          # still reaches it: it serves until held is answered
        self.assertEqual(list(service), [], "nothing more is handed out")
        self.assertTrue(held.reply("done"), "what it holds can be answered")
        first.join(30)
        second.join(30)
        self.assertEqual(results["held"].data, "done")
        self.assertIsInstance(results["not taken"], (eventbus.NoReply, eventbus.NoResponders),
                              "told at once, to ask again elsewhere")
        self.assertRaises(eventbus.NoResponders, caller.request, "r8.x", timeout=60)
        service.close()


class ServePolicyTests(support.BrokerTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = support.TempDir()
        with open(cls.dir.file("policy.conf"), "w") as f:
            f.write("deny serve locked.>\n")
        cls.broker = support.Broker("--policy", cls.dir.file("policy.conf"), directory=cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.broker.close()
        cls.dir.remove()

    def test_serving_a_type_the_policy_denies_is_forbidden_and_asking_it_finds_nobody(self):
        bus = self.connect()
        with self.assertRaises(eventbus.Forbidden) as raised:
            bus.serve("locked.>")
        self.assertIsInstance(raised.exception, PermissionError)
        self.assertIn("policy.conf", raised.exception.message)
        with bus.subscribe("locked.>"):                        # listening is still allowed
            self.assertRaises(eventbus.NoResponders, bus.request, "locked.x", timeout=60)


class AsyncRequestReplyTests(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = support.Broker()

    @classmethod
    def tearDownClass(cls):
        cls.broker.close()

    async def asyncSetUp(self):
        asyncio.get_running_loop().set_debug(False)

    async def connect(self, **options):
        bus = await eventbus.aio.connect(self.broker.socket, **options)
        self.addAsyncCleanup(bus.close)
        return bus

    async def test_tasks_ask_at_once_and_a_service_answers_in_its_own_order(self):
        server, caller = await self.connect(), await self.connect()
        n = 5
        async with server.serve("a1.>") as service:
            asks = [asyncio.ensure_future(caller.request("a1.x", i, timeout=30)) for i in range(n)]
            requests = [await service.get(10) for _ in range(n)]
            accepted = [await request.reply(request.data + 100) for request in reversed(requests)]
            answers = await asyncio.gather(*asks)
        self.assertEqual(accepted, [True] * n)
        self.assertEqual([a.data for a in answers], [i + 100 for i in range(n)])
        self.assertEqual({a.pid for a in answers}, {os.getpid()})

    async def test_no_responders_service_error_and_timeout(self):
        server, caller = await self.connect(), await self.connect()
        with self.assertRaises(eventbus.NoResponders):
            await caller.request("a2.nobody", timeout=120)

        held = []

        async def fail_all(service):
            async for request in service:
                if request.data == "slow":
                    held.append(request)                        # not answered in time
                else:
                    await request.fail(f"cannot {request.data}")
        async with server.serve("a2.>") as service:
            task = asyncio.ensure_future(fail_all(service))
            with self.assertRaises(eventbus.ServiceError) as raised:
                await caller.request("a2.x", "parse", timeout=30)
            self.assertEqual(raised.exception.message, "cannot parse")
            with self.assertRaises(eventbus.RequestTimeout):
                await caller.request("a2.x", "slow", timeout=0.05)
            await service.leave()
            await task                                          # the iteration ends after leave
            self.assertIs(await held[0].reply("late"), False, "refused, as a return value")
            self.assertEqual(service.unaccepted, 1)

if __name__ == "__main__":
    unittest.main()
