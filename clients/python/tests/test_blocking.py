"""The blocking client against the real eventbusd."""

import datetime
import os
import threading
import unittest

import support

import eventbus


class BlockingClientTests(support.BrokerTestCase):
    broker_args = ("--max-subscriptions", "8", "--max-frame", "65536")

    def test_a_published_event_reaches_a_subscriber_of_another_bus_with_its_fields(self):
        publisher, listener = self.connect(client="pub"), self.connect()
        with listener.subscribe("t1.>") as sub:
            seq = publisher.publish("t1.created", {"id": 7}, source="billing", id="x-1")
            ev = sub.get(5)
        self.assertEqual((ev.seq, ev.type, ev.data, ev.source, ev.id), (seq, "t1.created", {"id": 7}, "billing", "x-1"))
        self.assertEqual((ev.pid, ev.uid, ev.gid), (os.getpid(), os.getuid(), os.getgid()))
        self.assertIsNotNone(ev.time.tzinfo)
        self.assertLess(abs(datetime.datetime.now(datetime.timezone.utc) - ev.time), datetime.timedelta(seconds=60))
        self.assertFalse(ev.retained or ev.replayed)
        self.assertIsNone(ev.origin)

    def test_a_bus_does_not_hear_its_own_events_unless_echo(self):
        quiet, loud, other = self.connect(), self.connect(echo=True), self.connect()
        with quiet.subscribe("t2.>") as q, loud.subscribe("t2.>") as l:
            quiet.publish("t2.a", wait=False)
            loud.publish("t2.b")
            quiet.publish("t2.c")
            sentinel = other.publish("t2.end")
            self.assertEqual([q.get(5).type for _ in range(2)], ["t2.b", "t2.end"])
            self.assertEqual([l.get(5).type for _ in range(4)], ["t2.a", "t2.b", "t2.c", "t2.end"])
            self.assertEqual(sentinel, l.get(0) and 0 or sentinel)

    def test_without_echo_own_retained_events_come_with_last_and_own_replays_do_not_whatever_the_order(self):
        bus, other = self.connect(), self.connect()
        own = bus.publish("t10.a", "own")                  # before any subscription of this bus
        end = other.publish("t10.a", "end")
        with bus.subscribe("t10.>", since=own - 1) as sub:
            self.assertEqual(sub.get(5).seq, end, "its own event is not replayed to it")
        bus.publish("t10.kept", "mine", retain=True)       # after one
        with bus.subscribe("t10.kept", last=True) as sub:
            ev = sub.get(5)
        self.assertEqual((ev.data, ev.retained), ("mine", True), "the retained event is the type's value, whoever published it")

    def test_retained_events_get_clear_and_last(self):
        bus = self.connect()
        self.assertIsNone(bus.get("t3.currency"))
        seq = bus.publish("t3.currency", "EUR", retain=True)
        current = bus.get("t3.currency")
        self.assertEqual((current.seq, current.data, current.retained), (seq, "EUR", True))
        with self.connect().subscribe("t3.>", last=True) as sub:
            first = sub.get(5)
            self.assertEqual((first.data, first.retained), ("EUR", True))
        self.assertTrue(bus.clear("t3.currency"))
        self.assertFalse(bus.clear("t3.currency"))
        self.assertIsNone(bus.get("t3.currency"))

    def test_since_replays_the_history_in_order(self):
        bus, reader = self.connect(), self.connect()
        seqs = [bus.publish("t4.n", i) for i in range(5)]
        with reader.subscribe("t4.>", since=seqs[1]) as sub:
            got = [sub.get(5) for _ in range(3)]
        self.assertEqual([(ev.seq, ev.data, ev.replayed) for ev in got], [(s, i + 2, True) for i, s in enumerate(seqs[2:])])

    def test_wait_returns_the_next_event_or_none_after_the_timeout(self):
        bus, other = self.connect(), self.connect()
        self.assertIsNone(bus.wait("t5.never", timeout=0.2))
        timer = threading.Timer(0.2, lambda: other.publish("t5.go", 1))
        timer.start()
        self.addCleanup(timer.cancel)
        self.assertEqual(bus.wait("t5.>", timeout=10).data, 1)

    def test_stats_clients_and_types(self):
        bus = self.connect(client="observer")
        stats = bus.stats()
        for key in ("connections", "published", "delivered", "dropped", "instance", "me", "history_first_seq"):
            self.assertIn(key, stats)
        mine = [c for c in bus.clients() if c.get("client") == "observer"]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0]["pid"], os.getpid())
        if "types" in bus.info["features"]:
            self.assertIsInstance(bus.types(), list)
        else:
            with self.assertRaises(eventbus.UnknownOp):
                bus.types()
        bus.ping()

    def test_every_connection_of_a_bus_says_hello_with_its_options_and_overflow_only_when_set(self):
        default, chosen = self.connect(client="plain-opts"), self.connect(client="set-opts", overflow="drop-old")
        with default.subscribe("t9.>"), chosen.subscribe("t9.>"):
            seen = {(c["client"], bool(c["patterns"])): c["overflow"] for c in default.clients()
                    if c.get("client") in ("plain-opts", "set-opts")}
        broker_default = "wait" if "flow" in default.info["features"] else "drop-new"
        self.assertEqual(seen, {("plain-opts", False): broker_default, ("plain-opts", True): broker_default,
                                ("set-opts", False): "drop-old", ("set-opts", True): "drop-old"})

    def test_errors_are_exceptions_per_code(self):
        bus = self.connect()
        with self.assertRaises(eventbus.Forbidden) as forbidden:
            bus.publish("eventbus.mine")
        self.assertEqual(forbidden.exception.code, "forbidden")
        with self.assertRaises(eventbus.BadType):
            bus.publish("not a type")
        with self.assertRaises(eventbus.FrameTooLarge):
            bus.publish("t6.big", "x" * 70000)
        self.assertIsInstance(bus.publish("t6.small", 1), int, "the connection stays usable")
        with self.assertRaises(eventbus.LimitExceeded):
            bus.subscribe(*[f"t6.p{i}" for i in range(9)])

    def test_publish_without_waiting_reports_errors_at_flush(self):
        bus, reader = self.connect(), self.connect()
        with reader.subscribe("t7.>") as sub:
            with bus.batch():
                for i in range(3000):
                    bus.publish("t7.n", i, wait=False)
                bus.publish("t7.big", "x" * 70000, wait=False)
            bus.publish("t7.n", 3000, wait=False)
            with self.assertRaises(eventbus.FrameTooLarge) as failed:
                bus.flush()
            self.assertEqual(failed.exception.failed, 1)
            bus.flush()
            self.assertEqual([sub.get(5).data for _ in range(3001)], list(range(3001)))

    def test_publish_is_thread_safe(self):
        bus, reader = self.connect(), self.connect()
        with reader.subscribe("t8.>") as sub:
            def work(n):
                for i in range(200):
                    bus.publish(f"t8.w{n}", i, wait=i % 2 == 0)
            threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            bus.flush()
            got = {}
            for _ in range(800):
                ev = sub.get(5)
                got.setdefault(ev.type, []).append(ev.data)
        self.assertEqual(got, {f"t8.w{n}": list(range(200)) for n in range(4)})

    def test_an_unreachable_socket_names_the_path(self):
        path = self.broker.dir.file("missing.sock")
        with self.assertRaises(eventbus.Unavailable) as failed:
            eventbus.connect(path)
        self.assertEqual(str(failed.exception), f"cannot connect to the broker at {path}: No such file or directory "
                                                f"(is eventbusd running? start it with 'eventbusd --socket {path}')")
        self.assertIsInstance(failed.exception, ConnectionError)


class FlowTests(support.BrokerTestCase):
    """The iterator reads only as the application iterates."""

    broker_args = ("--max-outbound", "64K")

    def test_a_subscription_that_is_not_iterated_leaves_the_events_queued_at_the_broker(self):
        bus, reader = self.connect(), self.connect(client="slow", on_notice=lambda notice: None)
        with reader.subscribe("f.>") as sub:
            for i in range(2000):
                bus.publish("f.n", {"i": i, "pad": "x" * 64}, wait=False)
            bus.flush()
            queued = [c["queued_bytes"] for c in bus.clients() if c.get("client") == "slow" and c["patterns"]]
            self.assertGreater(queued[0], 32 << 10, "the client did not read the events into its memory")
            received = 0
            while (ev := sub.get(0.5 if received else 5)) is not None:
                received += 1
            # 1.1: the broker dropped what did not fit and said so; 1.2 (wait): the publisher was held.
            self.assertEqual(received + sub.dropped, 2000)


class ReconnectTests(unittest.TestCase):
    def setUp(self):
        self.broker = support.Broker()
        self.addCleanup(self.broker.close)

    def test_a_subscription_resumes_across_a_broker_restart_and_reports_the_gap(self):
        notices = []
        listener = eventbus.connect(self.broker.socket, on_notice=notices.append)
        self.addCleanup(listener.close)
        sub = listener.subscribe("r.>")
        self.addCleanup(sub.close)
        with eventbus.connect(self.broker.socket) as bus:
            bus.publish("r.before", 1)
        self.assertEqual(sub.get(5).type, "r.before")
        self.broker.restart()
        with eventbus.connect(self.broker.socket) as bus:
            bus.publish("r.while-away", 2)         # before the subscription is back
        ev = sub.get(10)
        self.assertEqual((ev.type, ev.replayed), ("r.while-away", True))
        self.assertEqual([n.kind for n in notices], ["disconnected", "reconnected", "gap"])
        self.assertEqual(notices[2].since_seq, 0, "a new broker run")
        self.assertEqual(sub.gaps, 1)

    def test_a_publisher_reconnects_by_itself(self):
        bus = eventbus.connect(self.broker.socket, on_notice=lambda n: None)
        self.addCleanup(bus.close)
        bus.publish("r.one")
        self.broker.restart()
        self.assertEqual(bus.publish("r.two"), 1, "the old run closed an idle connection: the next call connects to the new run")
        self.assertEqual(bus.publish("r.three"), 2)

    def test_closing_the_bus_ends_its_subscriptions(self):
        bus = eventbus.connect(self.broker.socket)
        sub = bus.subscribe("r.>")
        threading.Timer(0.1, bus.close).start()
        self.assertEqual(list(sub), [], "the iteration ends")
        with self.assertRaises(eventbus.Closed):
            bus.subscribe("r.>")

    def test_without_reconnect_a_lost_subscription_raises(self):
        bus = eventbus.connect(self.broker.socket, reconnect=False)
        self.addCleanup(bus.close)
        sub = bus.subscribe("r.>")
        self.broker.stop()
        with self.assertRaises(eventbus.ConnectionLost):
            next(iter(sub))


if __name__ == "__main__":
    unittest.main()
