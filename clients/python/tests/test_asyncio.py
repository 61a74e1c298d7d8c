"""The asyncio client against the real eventbusd."""

import asyncio
import os
import unittest

import support

import eventbus
import eventbus.aio


class AsyncClientTests(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = support.Broker("--max-outbound", "1M", "--max-frame", "2M")

    @classmethod
    def tearDownClass(cls):
        cls.broker.close()

    async def asyncSetUp(self):
        # IsolatedAsyncioTestCase runs the loop in debug mode, several times slower.
        asyncio.get_running_loop().set_debug(False)

    async def connect(self, **options):
        bus = await eventbus.aio.connect(self.broker.socket, **options)
        self.addAsyncCleanup(bus.close)
        return bus

    async def test_publish_and_iterate_with_fields(self):
        publisher, listener = await self.connect(), await self.connect()
        async with listener.subscribe("a1.>") as sub:      # subscribed on entering
            seq = await publisher.publish("a1.x", {"k": [1, 2]}, source="svc")
            ev = await sub.get(5)
        self.assertEqual((ev.seq, ev.type, ev.data, ev.source, ev.pid), (seq, "a1.x", {"k": [1, 2]}, "svc", os.getpid()))
        self.assertIsNotNone(ev.time.tzinfo)

    async def test_async_for_and_no_echo(self):
        bus, other = await self.connect(), await self.connect()
        sub = await bus.subscribe("a2.>")
        await bus.publish("a2.mine", wait=False)
        for i in range(3):
            await other.publish("a2.n", i)
        got = []
        async for ev in sub:
            got.append(ev.data)
            if len(got) == 3:
                await sub.close()
        self.assertEqual(got, [0, 1, 2])

    async def test_without_echo_own_retained_events_come_with_last_and_own_replays_do_not(self):
        bus, other = await self.connect(), await self.connect()
        own = await bus.publish("a9.a", "own")              # before any subscription of this bus
        end = await other.publish("a9.a", "end")
        async with bus.subscribe("a9.>", since=own - 1) as sub:
            self.assertEqual((await sub.get(5)).seq, end)
        await bus.publish("a9.kept", "mine", retain=True)
        async with bus.subscribe("a9.kept", last=True) as sub:
            ev = await sub.get(5)
        self.assertEqual((ev.data, ev.retained), ("mine", True))

    async def test_an_event_larger_than_asyncios_default_line_limit_arrives(self):
        bus, other = await self.connect(), await self.connect()
        async with await bus.subscribe("a3.big") as sub:
            await other.publish("a3.big", "x" * (200 << 10))
            ev = await sub.get(10)
        self.assertEqual(len(ev.data), 200 << 10)

    async def test_retained_stats_and_errors(self):
        bus = await self.connect()
        await bus.publish("a4.state", {"on": True}, retain=True)
        self.assertEqual((await bus.get("a4.state")).data, {"on": True})
        self.assertTrue(await bus.clear("a4.state"))
        self.assertIsNone(await bus.get("a4.state"))
        self.assertIn("published", await bus.stats())
        self.assertIsInstance(await bus.clients(), list)
        with self.assertRaises(eventbus.Forbidden):
            await bus.publish("eventbus.x")
        with self.assertRaises(eventbus.BadType):
            await bus.subscribe("a4..")
        if "types" not in bus.info["features"]:
            with self.assertRaises(eventbus.UnknownOp):
                await bus.types()
        await bus.ping()

    async def test_flush_raises_the_first_error_of_unawaited_publishes(self):
        bus = await self.connect()
        for i in range(100):
            await bus.publish("a5.n", i, wait=False)
        await bus.publish("eventbus.no", wait=False)
        with self.assertRaises(eventbus.Forbidden):
            await bus.flush()
        await bus.flush()

    async def test_wait(self):
        bus, other = await self.connect(), await self.connect()
        self.assertIsNone(await bus.wait("a6.never", timeout=0.1))
        waiter = asyncio.ensure_future(bus.wait("a6.>", timeout=10))
        while not any("a6.>" in c["patterns"] for c in await other.clients()):
            await asyncio.sleep(0.01)
        await other.publish("a6.go", 5)
        self.assertEqual((await waiter).data, 5)

    async def test_a_full_queue_stops_reading_the_socket(self):
        bus, reader = await self.connect(), await self.connect(client="aslow", on_notice=lambda n: None)
        sub = await reader.subscribe("a7.>", maxsize=16)
        self.addAsyncCleanup(sub.close)
        for i in range(4000):
            await bus.publish("a7.n", {"i": i, "pad": "x" * 64}, wait=False)
        await bus.flush()
        queued = [c["queued_bytes"] for c in await bus.clients() if c.get("client") == "aslow" and c["patterns"]]
        self.assertGreater(queued[0], 200 << 10, "events wait at the broker, not in this process")
        self.assertLessEqual(len(sub._queue), 16 + 4096, "at most one read past the bound")
        received = 0
        while await sub.get(0.5 if received else 5) is not None:
            received += 1
        self.assertEqual(received + sub.dropped, 4000)


    async def test_async_for_subscribes_at_its_first_step_and_closing_the_bus_ends_it(self):
        bus, other = await self.connect(), await self.connect()
        got = []

        async def consume():
            async for ev in bus.subscribe("a8.>"):
                got.append(ev.data)
                if len(got) == 2:
                    await bus.close()
        task = asyncio.ensure_future(consume())
        while not any("a8.>" in c["patterns"] for c in await other.clients()):
            await asyncio.sleep(0.01)
        await other.publish("a8.n", 1)
        await other.publish("a8.n", 2)
        await other.publish("a8.n", 3)
        await asyncio.wait_for(task, 10)
        self.assertEqual(got, [1, 2])


class AsyncReconnectTests(unittest.IsolatedAsyncioTestCase):
    async def test_a_subscription_resumes_after_a_restart(self):
        broker = support.Broker()
        self.addCleanup(broker.close)
        notices = []
        bus = await eventbus.aio.connect(broker.socket, on_notice=notices.append)
        self.addAsyncCleanup(bus.close)
        sub = await bus.subscribe("r.>")
        self.addAsyncCleanup(sub.close)
        broker.restart()
        other = await eventbus.aio.connect(broker.socket)
        await other.publish("r.while-away", 1)
        await other.close()
        ev = await sub.get(10)
        self.assertEqual((ev.type, ev.replayed), ("r.while-away", True))
        self.assertEqual([n.kind for n in notices], ["disconnected", "reconnected", "gap"])

    async def test_the_bus_reconnects_on_its_next_call(self):
        broker = support.Broker()
        self.addCleanup(broker.close)
        bus = await eventbus.aio.connect(broker.socket, on_notice=lambda n: None)
        self.addAsyncCleanup(bus.close)
        await bus.publish("r.one")
        broker.restart()
        while bus._link.transport is not None:      # the loss is seen once the loop reads the EOF
            await asyncio.sleep(0.01)
        self.assertEqual(await bus.publish("r.two"), 1, "a new connection to the new run")


if __name__ == "__main__":
    unittest.main()
