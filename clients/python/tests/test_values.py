"""Issue 37: every JSON value the broker forwards reaches a Python
subscriber (blocking and asyncio), and an event the client cannot take is
counted as dropped, against the real eventbusd.

The values are published as raw frames: the broker forwards `data` byte for
byte (PROTOCOL.md "Events"), numbers of any magnitude included."""

import asyncio
import decimal
import socket
import sys
import threading
import unittest

import support

import eventbus
import eventbus.aio
from eventbus import core

DEEP = 510
VALUES = [                                   # (data as published, what the application gets)
    (b"9" * 5000, 10 ** 5000 - 1),
    (b'{"n":-' + b"1" * 4301 + b"}", {"n": -(10 ** 4301 - 1) // 9}),
    (b"1e400", float("inf")),
    (b"[" * DEEP + b"]" * DEEP, "deep"),
    (b"3" * 60000, decimal.Decimal("3" * 60000)),
]


def raw_publish(path, type, frames_data):
    """Publishes each raw ``data`` on one raw connection; returns the replies."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        out = b"".join(b'{"op":"publish","req":%d,"type":"%s","data":%s}\n' % (i, type.encode(), data)
                       for i, data in enumerate(frames_data))
        s.sendall(out)
        reader = s.makefile("rb")
        return [core.decode_frame(reader.readline()) for _ in frames_data]


def depth_of(value):
    depth = 0
    while isinstance(value, list) and value:
        depth, value = depth + 1, value[0]
    return depth + 1 if value == [] else -1


class ValuesTests(support.BrokerTestCase):
    broker_args = ("--max-frame", "2M")

    def check(self, got):
        self.assertEqual(len(got), len(VALUES))
        for ev, (_, expected) in zip(got, VALUES):
            if expected == "deep":
                self.assertEqual(depth_of(ev.data), DEEP)
            else:
                self.assertEqual(ev.data, expected)
                self.assertIs(type(ev.data), type(expected))
        self.assertIn("too large to show", repr(got[0]))

    def test_a_blocking_subscriber_gets_big_integers_1e400_and_510_levels(self):
        bus = self.connect()
        with bus.subscribe("v1.>") as sub:
            replies = raw_publish(self.broker.socket, "v1.x", [data for data, _ in VALUES])
            self.assertTrue(all(r["op"] == "ok" for r in replies), replies)
            got = [sub.get(10) for _ in VALUES]
            self.assertEqual(sub.dropped, 0)
        self.check(got)

    def test_an_asyncio_subscriber_gets_them_too_deep_in_its_stack(self):
        async def main():
            bus = await eventbus.aio.connect(self.broker.socket)
            try:
                async with bus.subscribe("v2.>") as sub:
                    raw_publish(self.broker.socket, "v2.x", [data for data, _ in VALUES])

                    async def deep(n):        # the application awaits from far down its own stack
                        return await deep(n - 1) if n else [await sub.get(10) for _ in VALUES]
                    got = await deep(sys.getrecursionlimit() // 4)
                    return got, sub.dropped
            finally:
                await bus.close()
        got, dropped = asyncio.run(main())
        self.assertEqual(dropped, 0)
        self.check(got)

    def test_what_was_received_can_be_published_and_answered_on(self):
        bus, other = self.connect(), self.connect()
        with bus.subscribe("v4.>") as sub, bus.serve("v4.echo") as service:
            raw_publish(self.broker.socket, "v4.in", [data for data, _ in VALUES if data != b"1e400"])
            received = [sub.get(10).data for _ in range(len(VALUES) - 1)]
            seq = other.publish("v4.out", received)          # sent on as it came (a big int as its digits)
            while (ev := sub.get(10)).seq != seq:
                pass
            self.assertEqual(ev.data, received)
            answers = []
            thread = threading.Thread(target=lambda: answers.append(other.request("v4.echo", received, timeout=30)))
            thread.start()
            request = service.get(10)
            self.assertTrue(request.reply(request.data))
            thread.join(30)
        self.assertEqual(answers[0].data, received)

    def test_an_event_the_client_cannot_take_counts_as_dropped_and_is_told_as_drops_are(self):
        limit, core.MAX_INCOMING_FRAME = core.MAX_INCOMING_FRAME, 4096   # this client's own line limit
        self.addCleanup(setattr, core, "MAX_INCOMING_FRAME", limit)
        notices = []
        bus, other = self.connect(), self.connect(on_notice=notices.append)
        with other.subscribe("v3.>") as sub:
            big = bus.publish("v3.big", "x" * 10000)
            after = bus.publish("v3.after", 1)
            self.assertEqual(sub.get(10).seq, after)
            self.assertEqual(sub.dropped, 1)
        self.assertEqual([(n.kind, n.count, n.since_seq) for n in notices], [("dropped", 1, big)])
        self.assertIsInstance(notices[0].error, eventbus.MalformedFrame)


if __name__ == "__main__":
    unittest.main()
