"""Against a scripted fake broker: what a real broker does rarely or not on
this branch (partial frames, oversized lines, closes mid-frame, notices,
reconnect frames, and the PROTOCOL 1.2 replies)."""

import asyncio
import datetime
import time
import unittest

import support

import eventbus
import eventbus.aio
from eventbus import core


class FakeBrokerTestCase(unittest.TestCase):
    def fake(self, script):
        fake = support.FakeBroker(script)
        self.addCleanup(fake.close)
        return fake

    def connect(self, fake, **options):
        bus = eventbus.connect(fake.socket, **options)
        self.addCleanup(bus.close)
        return bus


class FramingAgainstAFakeBroker(FakeBrokerTestCase):
    def test_an_event_written_in_pieces_arrives_whole(self):
        def script(fake):
            fake.accept().hello()      # the Bus's own connection; the subscription opens another
            c = fake.accept()
            c.hello()
            c.subscribe()
            line = b'{"op":"event","seq":1,"type":"a.b","time":"2026-11-29T13:00:00.123Z","pid":1,"data":{"k":"v"}}\r\n'
            for i in range(0, len(line), 9):
                c.send(line[i:i + 9])
                time.sleep(0.002)
            c.event(2)
            c.read()
        fake = self.fake(script)
        sub = self.connect(fake).subscribe("a.>")
        first, second = sub.get(5), sub.get(5)
        self.assertEqual((first.seq, first.data, second.seq), (1, {"k": "v"}, 2))
        sub.close()
        fake.join()

    def test_an_event_over_the_clients_limit_is_skipped_and_counted_as_dropped(self):
        limit, core.MAX_INCOMING_FRAME = core.MAX_INCOMING_FRAME, 1000
        self.addCleanup(setattr, core, "MAX_INCOMING_FRAME", limit)

        def script(fake):
            fake.accept().hello()      # the Bus's own connection; the subscription opens another
            c = fake.accept()
            c.hello()
            c.subscribe()
            c.event(1, data="x" * 5000)
            c.event(2)
            c.read()
        fake = self.fake(script)
        notices = []
        sub = self.connect(fake, on_notice=notices.append).subscribe("a.>")
        self.assertEqual(sub.get(5).seq, 2)
        self.assertEqual([(n.kind, n.count, n.since_seq) for n in notices], [("dropped", 1, 1)])
        self.assertIsInstance(notices[0].error, eventbus.MalformedFrame)
        self.assertEqual(sub.dropped, 1)
        sub.close()
        fake.join()

    def test_a_broker_that_closes_mid_frame_loses_the_connection_not_the_frame_boundaries(self):
        def script(fake):
            fake.accept().hello()      # the Bus's own connection; the subscription opens another
            c = fake.accept()
            c.hello()
            c.subscribe()
            c.event(1)
            c.send(b'{"op":"event","seq":2,"type":"a.b","da')
            c.close()
        fake = self.fake(script)
        sub = self.connect(fake, reconnect=False).subscribe("a.>")
        self.assertEqual(sub.get(5).seq, 1)
        with self.assertRaises(eventbus.ConnectionLost) as lost:
            sub.get(5)
        self.assertIn(fake.socket, str(lost.exception))
        fake.join()

    def test_a_broker_that_closes_before_answering_gets_the_start_failure_hint(self):
        def script(fake):
            fake.accept().close()
        fake = self.fake(script)
        with self.assertRaises(eventbus.Unavailable) as failed:
            eventbus.connect(fake.socket)
        self.assertEqual(str(failed.exception), f"the broker at {fake.socket} closed the connection before answering: "
                                                "it may have exited (see its standard error or log)")
        fake.join()

    def test_an_error_before_the_close_is_the_reason_given(self):
        def script(fake):
            fake.accept().hello()      # the Bus's own connection; the subscription opens another
            c = fake.accept()
            c.hello()
            c.subscribe()
            c.send({"op": "error", "code": "slow_consumer", "message": "outbound queue over its limit"})
            c.close()
        fake = self.fake(script)
        sub = self.connect(fake, reconnect=False, on_notice=lambda n: None).subscribe("a.>")
        with self.assertRaises(eventbus.SlowConsumer):
            sub.get(5)
        fake.join()


class UnansweredPublishes(FakeBrokerTestCase):
    def test_publishes_unanswered_when_the_connection_is_lost_are_reported_by_flush(self):
        def script(fake):
            c = fake.accept()
            c.hello()
            first = c.expect("publish")
            c.ok(first, seq=1, delivered=0)
            c.expect("publish")
            c.expect("publish")
            c.close()
        fake = self.fake(script)
        bus = self.connect(fake, reconnect=False)
        for i in range(3):
            bus.publish("a.b", i, wait=False)
        fake.join()
        with self.assertRaises(eventbus.ConnectionLost) as lost:
            bus.flush()
        self.assertIn("2 publish(es) were unanswered", str(lost.exception))


class NoticesAndReconnect(FakeBrokerTestCase):
    def test_dropped_and_gap_frames_are_notices_and_counted(self):
        def script(fake):
            fake.accept().hello()      # the Bus's own connection; the subscription opens another
            c = fake.accept()
            c.hello()
            c.subscribe()
            c.send({"op": "gap", "type": "a.>", "since_seq": 4, "first_seq": 9})
            c.send({"op": "dropped", "count": 12, "since_seq": 20})
            c.event(33)
            c.read()
        fake = self.fake(script)
        notices = []
        sub = self.connect(fake, on_notice=notices.append).subscribe("a.>")
        self.assertEqual(sub.get(5).seq, 33)
        self.assertEqual([(n.kind, n.since_seq) for n in notices], [("gap", 4), ("dropped", 20)])
        self.assertEqual(str(notices[0]), "the broker's history no longer reaches back to seq 5; events of 'a.>' from seq 5 to 8 may have been missed")
        self.assertEqual((sub.dropped, sub.gaps), (12, 1))
        sub.close()
        fake.join()

    def test_a_reconnect_resubscribes_with_since_the_last_seq_and_its_instance(self):
        seen = {}

        def script(fake):
            fake.accept().hello()      # the Bus's own connection; the subscription opens another
            c = fake.accept()
            c.hello(instance="run-a")
            seen["first"] = c.subscribe(current_seq=10, instance="run-a")
            c.event(11)
            c.close()
            c = fake.accept()
            c.hello(instance="run-a")
            seen["again"] = c.subscribe(current_seq=11, instance="run-a")
            c.event(12, replayed=True)
            c.read()
        fake = self.fake(script)
        notices = []
        sub = self.connect(fake, on_notice=notices.append).subscribe("a.>", "b.*", last=True)
        self.assertEqual([sub.get(5).seq, sub.get(5).seq], [11, 12])
        self.assertEqual([(f["type"], f.get("last"), f.get("since")) for f in seen["first"]], [("a.>", True, None), ("b.*", True, None)])
        self.assertEqual([(f["type"], f.get("last"), f["since"], f["instance"]) for f in seen["again"]],
                         [("a.>", None, 11, "run-a"), ("b.*", None, 11, "run-a")])
        self.assertEqual([n.kind for n in notices], ["disconnected", "reconnected"])
        sub.close()
        fake.join()

    def test_a_reconnect_before_any_event_resumes_from_the_seq_at_subscribe_time(self):
        seen = {}

        def script(fake):
            fake.accept().hello()      # the Bus's own connection; the subscription opens another
            c = fake.accept()
            c.hello()
            c.subscribe(current_seq=41)
            c.close()
            c = fake.accept()
            c.hello()
            seen["again"] = c.subscribe(current_seq=41)
            c.event(42)
            c.read()
        fake = self.fake(script)
        sub = self.connect(fake, on_notice=lambda n: None).subscribe("a.>")
        self.assertEqual(sub.get(5).seq, 42)
        self.assertEqual(seen["again"][0]["since"], 41)
        sub.close()
        fake.join()


class Protocol12AgainstAFakeBroker(FakeBrokerTestCase):
    """What a 1.2 broker adds, on this branch's 1.1 broker's absence."""

    def test_hello_sends_overflow_only_when_set_and_exposes_the_new_fields(self):
        hellos = []

        def script(fake):
            connections = []
            for _ in range(2):
                connections.append(fake.accept())
                hellos.append(connections[-1].hello(features=["flow", "types", "retain", "history"], pid=4242))
            for c in connections:
                c.read()
        fake = self.fake(script)
        plain = self.connect(fake)
        waiting = self.connect(fake, overflow="wait", client="svc")
        self.assertEqual((plain.info["pid"], plain.info["features"][:2]), (4242, ["flow", "types"]))
        plain.close()
        waiting.close()
        fake.join()
        self.assertNotIn("overflow", hellos[0])
        self.assertEqual((hellos[1]["overflow"], hellos[1]["client"]), ("wait", "svc"))

    def test_types_stats_and_clients_pass_the_new_fields_through(self):
        def script(fake):
            c = fake.accept()
            c.hello(features=["flow", "types"], pid=1)
            frame = c.expect("types")
            assert frame.get("limit") == 5, frame
            c.ok(frame, types=[{"type": "a.b", "published": 3, "delivered": 2, "dropped": 0, "subscribers": 1,
                                "retained": False, "last_seq": 9, "last_time": "2026-11-29T13:00:00.123Z"}])
            c.ok(c.expect("stats"), connections=1, held=1, holds=7, stalls=2)
            c.ok(c.expect("clients"), clients=[{"conn": 1, "holding": 1, "held": False, "behind": True}])
            c.read()
        fake = self.fake(script)
        bus = self.connect(fake)
        self.assertEqual(bus.types(limit=5)[0]["last_seq"], 9)
        stats = bus.stats()
        self.assertEqual((stats["held"], stats["holds"], stats["stalls"]), (1, 7, 2))
        self.assertEqual(bus.clients()[0]["behind"], True)
        bus.close()
        fake.join()

    def test_types_on_a_broker_without_it_raises_unknown_op(self):
        def script(fake):
            c = fake.accept()
            c.hello()
            frame = c.expect("types")
            c.send({"op": "error", "req": frame["req"], "code": "unknown_op", "message": 'unknown op "types"'})
            c.read()
        fake = self.fake(script)
        bus = self.connect(fake)
        with self.assertRaises(eventbus.UnknownOp):
            bus.types()
        bus.close()
        fake.join()

    def test_the_asyncio_client_reads_pieces_and_the_new_fields_the_same_way(self):
        def script(fake):
            c = fake.accept()
            c.hello(features=["flow", "types"], pid=77)
            frame = c.expect("types")
            reply = b'{"op":"ok","req":%d,"types":[{"type":"x","published":1}]}\n' % frame["req"]
            for i in range(0, len(reply), 5):
                c.send(reply[i:i + 5])
                time.sleep(0.001)
            c.read()
        fake = self.fake(script)

        async def run():
            async with await eventbus.aio.connect(fake.socket) as bus:
                return bus.info["pid"], await bus.types()
        self.assertEqual(asyncio.run(run()), (77, [{"type": "x", "published": 1}]))
        fake.join()


if __name__ == "__main__":
    unittest.main()


class RequestsAgainstAFakeBroker(FakeBrokerTestCase):
    """Several requests in flight on one connection, answered out of order:
    the fake answers only once every request is written, last first (a real
    broker answers as its services do)."""

    N = 4

    def script(self, fake):
        c = fake.accept()
        c.hello()
        requests = [c.expect("request") for _ in range(self.N)]
        for i, request in enumerate(reversed(requests)):
            c.ok(request, seq=100 + i, reply={"time": "2026-11-29T13:00:00.123Z", "pid": 1, "uid": 2, "gid": 3,
                                               "data": request["data"]})
        c.read()

    def test_requests_of_several_threads_are_in_flight_at_once_on_one_bus(self):
        import concurrent.futures
        fake = self.fake(self.script)
        bus = self.connect(fake)
        with concurrent.futures.ThreadPoolExecutor(self.N) as pool:
            answers = list(pool.map(lambda i: bus.request("svc.echo", i, timeout=10), range(self.N)))
        self.assertEqual([a.data for a in answers], list(range(self.N)))
        self.assertEqual({(a.pid, a.uid, a.gid) for a in answers}, {(1, 2, 3)})
        bus.close()
        fake.join()

    def test_asyncio_requests_are_in_flight_at_once_on_one_bus(self):
        fake = self.fake(self.script)

        async def main():
            async with await eventbus.aio.connect(fake.socket) as bus:
                return await asyncio.gather(*(bus.request("svc.echo", i, timeout=10) for i in range(self.N)))
        self.assertEqual([a.data for a in asyncio.run(main())], list(range(self.N)))
        fake.join()

    def test_a_broker_that_never_answers_a_request_times_out_locally_and_the_late_answer_is_ignored(self):
        def script(fake):
            c = fake.accept()
            c.hello()
            request = c.expect("request")
            ping = c.expect("ping")                 # asked after the local timeout
            c.send({"op": "error", "req": request["req"], "code": "timeout", "message": "late"})
            c.ok(ping)
            c.read()
        fake = self.fake(script)
        grace, core.REQUEST_GRACE = core.REQUEST_GRACE, 0.05
        self.addCleanup(setattr, core, "REQUEST_GRACE", grace)
        notices = []
        bus = self.connect(fake, on_notice=notices.append)
        with self.assertRaises(eventbus.RequestTimeout):
            bus.request("svc.slow", timeout=0)
        bus.ping()
        self.assertEqual(notices, [])
        bus.close()
        fake.join()


class ServingAgainstAFakeBroker(FakeBrokerTestCase):
    def script(self, fake):
        fake.accept().hello()          # the bus's own connection; the service opens another
        c = fake.accept()
        c.hello()
        subscribe = c.expect("subscribe")
        self.assertEqual((subscribe["type"], subscribe["serve"], subscribe["group"]), ("svc.>", True, "g"))
        c.ok(subscribe, type="svc.>", members=2)
        c.ok(c.expect("stats"), instance="fake-run-1", history_first_seq=1, history_events=0)
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        for seq in (1, 2):                   # (received now: a request's timeout counts from its time)
            c.send({"op": "request", "seq": seq, "type": "svc.a", "time": now, "pid": 1,
                    "uid": 0, "gid": 0, "data": seq, "reply": f"tok{seq}", "timeout": 900})
        first = c.expect("reply")
        self.assertEqual((first["to"], first["data"]), ("tok1", 1))
        c.ok(first, accepted=True)
        second = c.expect("reply")
        self.assertEqual((second["to"], second["error"]), ("tok2", "no disk"))
        c.ok(second, accepted=False)
        leave = c.expect("unsubscribe")      # once every request handed out is answered
        self.assertEqual((leave["type"], leave["serve"], leave["group"]), ("svc.>", True, "g"))
        try:                                 # (the client may have closed already: nothing more is handed out)
            c.send({"op": "request", "seq": 3, "type": "svc.a", "data": 3, "reply": "tok3", "timeout": 900})
            c.ok(leave, removed=True)
            c.read()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def test_a_service_answers_counts_what_was_not_accepted_and_leaves_after_its_share(self):
        fake = self.fake(self.script)
        bus = self.connect(fake)
        service = bus.serve("svc.>", group="g")
        self.assertEqual(service.members, 2)
        got, accepted = [], []
        for request in service:
            got.append((request.seq, request.data, 0.0 < request.timeout <= 0.9))
            if request.seq == 1:
                accepted.append(request.reply(request.data))
            elif request.seq == 2:
                service.leave()                      # held: it is answered before the unsubscribe
                accepted.append(request.fail("no disk"))
                self.assertFalse(request.reply("again"), "one answer per request")
        self.assertEqual(got, [(1, 1, True), (2, 2, True)], "nothing handed out after leave(); each within its 0.9 s")
        self.assertEqual(accepted, [True, False])
        self.assertEqual(service.unaccepted, 1, "refused by the broker (the second answer was never sent)")
        service.close()
        fake.join()

    def test_an_asyncio_service_does_the_same(self):
        fake = self.fake(self.script)

        async def main():
            async with await eventbus.aio.connect(fake.socket) as bus:
                async with bus.serve("svc.>", group="g") as service:
                    got, accepted = [], []
                    async for request in service:
                        got.append((request.seq, request.data))
                        if request.seq == 1:
                            accepted.append(await request.reply(request.data))
                        elif request.seq == 2:
                            await service.leave()
                            accepted.append(await request.fail("no disk"))
                    return got, accepted, service.members, service.unaccepted
        self.assertEqual(asyncio.run(main()), ([(1, 1), (2, 2)], [True, False], 2, 1))
        fake.join()
