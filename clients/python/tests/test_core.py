"""The sans-I/O core: framing, socket resolution, messages, the session's
bookkeeping. No sockets."""

import datetime
import time
import unittest

import support  # noqa: F401  (puts the package on sys.path)

from eventbus import core, errors


def event_line(seq, type="a.b", **extra):
    fields = "".join(f',"{k}":{v}' for k, v in extra.items())
    return (f'{{"op":"event","seq":{seq},"type":"{type}","time":"2026-11-29T13:00:00.123Z","source":"s",'
            f'"id":"i","pid":7,"uid":1000,"gid":100,"data":{{"n":{seq}}}{fields}}}\n').encode()


class FramingTests(unittest.TestCase):
    def test_lines_split_at_lf_in_any_chunking_with_cr_tolerated_and_blank_lines_skipped(self):
        stream = event_line(1) + b"\n\r\n" + event_line(2).replace(b"\n", b"\r\n") + event_line(3)
        for size in (1, 2, 7, 64, len(stream)):
            session = core.Session()
            items = []
            for i in range(0, len(stream), size):
                items += session.receive(stream[i:i + size])
            self.assertEqual([item.seq for item in items], [1, 2, 3], f"chunks of {size}")
            self.assertEqual(session.last_seq, 3)

    def test_a_line_over_the_limit_is_skipped_to_its_lf_and_reported(self):
        session = core.Session(max_frame=200)
        big = b'{"op":"other","seq":1,"type":"a","data":"' + b"x" * 500 + b'"}\n'
        items = []
        for i in range(0, len(big), 64):
            items += session.receive(big[i:i + 64])
        items += session.receive(event_line(2))
        kinds = [getattr(item, "kind", None) or item.seq for item in items]
        self.assertEqual(kinds, ["malformed", 2])
        self.assertIsInstance(items[0].error, errors.MalformedFrame)

    def test_an_event_over_the_limit_is_counted_and_told_as_dropped_whole_or_in_chunks(self):
        big = b'{"op":"event","seq":41,"type":"a","data":"' + b"x" * 500 + b'"}\n'
        for size in (7, 64, len(big)):
            session = core.Session(max_frame=200)
            items = []
            for i in range(0, len(big), size):
                items += session.receive(big[i:i + size])
            items += session.receive(event_line(42))
            self.assertEqual([(i.kind, i.count, i.since_seq) if isinstance(i, core.Notice) else i.seq for i in items],
                             [("dropped", 1, 41), 42], f"chunks of {size}")
            self.assertEqual(session.dropped, 1)
            self.assertIn("could not decode", str(items[0]))

    def test_a_line_that_is_not_json_is_a_malformed_notice_and_the_rest_is_read(self):
        session = core.Session()
        items = session.receive(b"not json\n" + event_line(1) + b'{"no":"op"}\n' + event_line(2))
        self.assertEqual([getattr(i, "kind", "event") for i in items], ["malformed", "event", "malformed", "event"])

    def test_unknown_ops_are_ignored(self):
        self.assertEqual(core.Session().receive(b'{"op":"future-thing","x":1}\n'), [])


class EncodingTests(unittest.TestCase):
    def test_no_request_holds_what_a_line_reader_splits(self):
        # The broker refuses a raw CR, U+0085, U+2028 or U+2029 (issue 20):
        # they are written as escapes, and the value reads back the same.
        value = {"a": "x\u2028y\u2029z\x85\r\u00e9", "b": ["\u2028"]}
        for frame in (core.encode_json(value).encode(),
                      core.encode_request("publish", 1, {"type": "a.b", "data": value}),
                      core.encode_publish(2, "a.b", value, False, "s\u2029", "i\x85")):
            text = frame.decode()
            self.assertEqual(len(text.rstrip("\n").splitlines()), 1, text)
            self.assertNotIn("\r", text)
        self.assertEqual(__import__("json").loads(core.encode_json(value)), value)
        self.assertIn("\u00e9", core.encode_json(value))  # other UTF-8 is kept as it is


class EventTests(unittest.TestCase):
    def test_fields_and_an_aware_time(self):
        (ev,) = core.Session().receive(event_line(5, replayed="true", origin='{"node":"b"}'))
        self.assertEqual((ev.seq, ev.type, ev.data, ev.source, ev.id, ev.pid, ev.uid, ev.gid),
                         (5, "a.b", {"n": 5}, "s", "i", 7, 1000, 100))
        self.assertEqual(ev.time, datetime.datetime(2026, 11, 29, 13, 0, 0, 123000, tzinfo=datetime.timezone.utc))
        self.assertTrue(ev.replayed)
        self.assertFalse(ev.retained)
        self.assertEqual(ev.origin, {"node": "b"})


class ResolutionTests(unittest.TestCase):
    """PROTOCOL.md "Transport", first that applies."""

    def resolve(self, environ, euid=1000, **options):
        return core.resolve_socket(environ=environ, euid=euid, **options)

    def test_order(self):
        env = {"EVENTBUS_SOCKET": "/e.sock", "XDG_RUNTIME_DIR": "/run/user/1000"}
        self.assertEqual(self.resolve(env, socket="/x.sock"), "/x.sock")
        self.assertEqual(self.resolve(env, system=True), "/run/eventbus/bus.sock")
        self.assertEqual(self.resolve(env, user=True), "/run/user/1000/eventbus/bus.sock")
        self.assertEqual(self.resolve(env), "/e.sock")
        self.assertEqual(self.resolve({"XDG_RUNTIME_DIR": "/run/user/1000"}), "/run/user/1000/eventbus/bus.sock")
        self.assertEqual(self.resolve({"XDG_RUNTIME_DIR": "/run/user/0"}, euid=0), "/run/eventbus/bus.sock")
        self.assertEqual(self.resolve({"XDG_RUNTIME_DIR": "", "EVENTBUS_SOCKET": ""}), "/run/eventbus/bus.sock")

    def test_refusals(self):
        with self.assertRaises(ValueError):
            self.resolve({}, user=True)
        with self.assertRaises(ValueError):
            self.resolve({}, socket="")
        with self.assertRaises(ValueError):
            self.resolve({}, system=True, user=True)


class MessageTests(unittest.TestCase):
    def test_connect_errors_read_like_the_clis(self):
        import errno
        missing = core.connect_error("/run/user/5/eventbus/bus.sock", FileNotFoundError(errno.ENOENT, "x"))
        self.assertEqual(str(missing), "cannot connect to the broker at /run/user/5/eventbus/bus.sock: No such file or directory "
                         "(is eventbusd running? start it with 'eventbusd --socket /run/user/5/eventbus/bus.sock' or "
                         "'systemctl --user start eventbus.socket'; when the socket unit failed ('systemctl --user status eventbus.socket "
                         "eventbus.service'), fix the cause ('journalctl --user -u eventbus'), then 'systemctl --user reset-failed "
                         "eventbus.service eventbus.socket' and start it again)")
        self.assertEqual(missing.path, "/run/user/5/eventbus/bus.sock")
        self.assertIn("(is eventbusd running? start it with 'eventbusd --system' or 'systemctl start eventbus.socket'; when the socket unit failed "
                      "('systemctl status eventbus.socket eventbus.service'), fix the cause ('journalctl -u eventbus'), "
                      "then 'systemctl reset-failed eventbus.service eventbus.socket' and start it again)",
                      str(core.connect_error(core.SYSTEM_BUS, FileNotFoundError(errno.ENOENT, "x"))))
        self.assertIn("SocketGroup=", str(core.connect_error("/x", PermissionError(errno.EACCES, "x"))))

    def test_a_close_before_answering_names_the_units_to_look_at(self):
        self.assertEqual(str(core.closed_error(core.SYSTEM_BUS, heard=False)),
                         "the broker at /run/eventbus/bus.sock closed the connection before answering: it may have failed "
                         "to start (see 'systemctl status eventbus.service' and 'journalctl -u eventbus')")
        self.assertIsInstance(core.closed_error("/x", heard=True), errors.ConnectionLost)


class SessionTests(unittest.TestCase):
    def test_requests_are_numbered_and_replies_matched(self):
        session = core.Session(client="me", overflow="drop-old")
        req, hello = session.start()
        self.assertEqual(hello, b'{"op":"hello","req":1,"client":"me","overflow":"drop-old"}\n')
        self.assertNotIn(b"overflow", core.Session().start()[1], "overflow is sent only when set")
        (reply,) = session.receive(b'{"op":"ok","req":1,"instance":"r1","pid":42,"features":["flow"]}\n')
        self.assertEqual((reply.req, reply.error), (1, None))
        self.assertEqual(session.info["pid"], 42)
        req, _ = session.request("clear", type="a")
        (reply,) = session.receive(b'{"op":"error","req":%d,"code":"forbidden","message":"no"}\n' % req)
        self.assertIsInstance(reply.error, errors.Forbidden)
        self.assertEqual((reply.error.code, reply.error.message), ("forbidden", "no"))

    def test_a_frame_too_large_answered_without_req_fails_the_oldest_request(self):
        session = core.Session()
        first, _ = session.publish("a", "x" * 10)
        session.publish("a", 1)
        (reply,) = session.receive(b'{"op":"error","code":"frame_too_large","message":"big"}\n')
        self.assertEqual(reply.req, first)
        self.assertIsInstance(reply.error, errors.FrameTooLarge)

    def test_publish_encoding_and_local_checks(self):
        session = core.Session()
        _, frame = session.publish("a.b", {"k": "é\n"}, True, "src", "id-1")
        self.assertEqual(frame, '{"op":"publish","req":1,"type":"a.b","data":{"k":"é\\n"},"retain":true,"source":"src","id":"id-1"}\n'.encode())
        with self.assertRaises(errors.BadType):
            session.publish("a.>", None)
        with self.assertRaises(ValueError):
            session.publish("a", float("nan"))
        with self.assertRaises(TypeError):
            session.publish("a", object())
        for bad in ("", "a..b", "a.", "a b", "x" * 256):
            with self.assertRaises(errors.BadType, msg=bad):
                core.check_type(bad)
        for good in ("a", "a.*.c", "a.>", ">", "*"):
            core.check_pattern(good)
        for bad in ("a.>.b", "a*", ""):
            with self.assertRaises(errors.BadType, msg=bad):
                core.check_pattern(bad)

    def test_own_seqs_are_known_once_the_publish_is_answered(self):
        session = core.Session()
        session.record_own = True
        self.assertFalse(session.own_seq(3), "nothing published: not ours")
        req, _ = session.publish("a", 1, wait=False)
        self.assertIsNone(session.own_seq(3), "a publish is unanswered: cannot tell yet")
        self.assertEqual(session.receive(b'{"op":"ok","req":%d,"seq":3,"delivered":1}\n' % req), [],
                         "the ok of a publish nobody waits for gives nothing to the driver")
        self.assertTrue(session.own_seq(3))
        self.assertFalse(session.own_seq(2))
        session.lost()
        req, _ = session.start()
        session.receive(b'{"op":"ok","req":%d,"instance":"another-run"}\n' % req)
        self.assertFalse(session.own_seq(3), "a new broker run numbers from 1 again")

    def test_resume_position_from_stats_events_and_a_new_run(self):
        session = core.Session()
        session.start()
        session.receive(b'{"op":"ok","req":1,"instance":"r1"}\n')
        reqs, frames = session.subscribe_requests(["a.>"], last=True)
        self.assertIn(b'"last":true', frames)
        session.receive(b'{"op":"ok","req":%d,"type":"a.>"}\n{"op":"ok","req":%d,"instance":"r1","history_first_seq":5,"history_events":3}\n' % tuple(reqs))
        self.assertEqual((session.instance, session.last_seq), ("r1", 7))
        session.receive(event_line(9))
        _, again = session.resubscribe_requests()
        self.assertIn(b'"since":9,"instance":"r1"', again)
        self.assertNotIn(b'"last"', again, "a resubscribe does not ask for the current values again")
        # A new run: its own replay and stats replace the old position.
        session.lost()
        session.start()
        session.receive(b'{"op":"ok","req":%d,"instance":"r2"}\n' % (reqs[-1] + 1))
        reqs, _ = session.resubscribe_requests()
        session.receive(b'{"op":"ok","req":%d,"type":"a.>"}\n{"op":"gap","type":"a.>","since_seq":0,"first_seq":1}\n' % reqs[0]
                        + event_line(2) + b'{"op":"ok","req":%d,"instance":"r2","history_first_seq":1,"history_events":2}\n' % reqs[1])
        self.assertEqual((session.instance, session.last_seq, session.gaps), ("r2", 2, 1))

    def test_dropped_notices_are_counted(self):
        session = core.Session()
        (notice,) = session.receive(b'{"op":"dropped","count":12,"since_seq":4711}\n')
        self.assertEqual((notice.kind, notice.count, notice.since_seq, session.dropped), ("dropped", 12, 4711, 12))


if __name__ == "__main__":
    unittest.main()


class DecodingTests(unittest.TestCase):
    """Issue 37: every JSON value the broker forwards reaches the application."""

    def receive_one(self, data_text, session=None):
        session = session or core.Session()
        line = b'{"op":"event","seq":9,"type":"a.b","time":"2026-11-29T13:00:00.123Z","data":' + data_text + b'}\n'
        # Alone and among other lines (the batch parse falls back line by line).
        items = session.receive(line + event_line(10))
        self.assertEqual([i.seq for i in items], [9, 10])
        return items[0].data

    def test_integers_past_the_interpreters_digit_limit_are_ints(self):
        for digits in (4301, 5000, 20000):
            self.assertEqual(self.receive_one(b"9" * digits), 10 ** digits - 1)
            self.assertEqual(self.receive_one(b'{"n":-' + b"7" * digits + b"}")["n"], -(10 ** digits - 1) // 9 * 7)

    def test_an_integer_past_big_int_digits_is_an_exact_decimal(self):
        value = self.receive_one(b"12" * (core.BIG_INT_DIGITS // 2 + 1))
        self.assertEqual(value, __import__("decimal").Decimal("12" * (core.BIG_INT_DIGITS // 2 + 1)))
        self.assertEqual(value, value.to_integral_value())

    def test_big_integers_and_decimals_received_encode_back_as_their_digits(self):
        json_text = b'{"a":' + b"9" * 5000 + b',"b":[-' + b"1" * 4400 + b',2],"c":' + b"3" * 60000 + b',"s":"\\u0000"}'
        value = core.decode_frame(json_text)
        self.assertEqual(core.encode_json(value).encode(), json_text.replace(b"\\u0000", b"\\u0000"))
        self.assertEqual(core.decode_frame(core.encode_json(value).encode()), value)
        self.assertRaises(ValueError, core.encode_json, [10 ** 5000, float("nan")])

    def test_1e400_is_infinity_as_json_gives_it(self):
        self.assertEqual(self.receive_one(b"[1e400,-1e400]"), [float("inf"), float("-inf")])

    def test_510_levels_of_nesting_decode_even_deep_in_the_callers_stack(self):
        deep = b"[" * 510 + b"]" * 510

        def at_depth(n):
            return at_depth(n - 1) if n else self.receive_one(deep)
        limit = __import__("sys").getrecursionlimit()
        value = at_depth(limit - 200)      # the C scanner alone would run out of levels here
        for _ in range(509):
            self.assertEqual(len(value), 1)
            value = value[0]
        self.assertEqual(value, [])
        self.assertEqual(__import__("sys").getrecursionlimit(), limit, "the limit is put back")

    def test_an_event_that_cannot_be_decoded_is_counted_and_told_as_dropped(self):
        session = core.Session()
        items = session.receive(b'{"op":"event","seq":5,"type":"a.b","data":[1,}\n' + event_line(6))
        self.assertEqual([(i.kind, i.count, i.since_seq) if isinstance(i, core.Notice) else i.seq for i in items],
                         [("dropped", 1, 5), 6])
        self.assertEqual(session.dropped, 1)
        self.assertIsInstance(items[0].error, errors.MalformedFrame)

    def test_an_answer_that_cannot_be_decoded_fails_its_request_instead_of_leaving_it_waiting(self):
        session = core.Session()
        req, _ = session.request("ping")
        items = session.receive(b'{"op":"ok","req":%d,"x":[}\n' % req)
        self.assertEqual([(i.req, type(i.error)) for i in items], [(req, errors.MalformedFrame)])
        self.assertEqual(session.pending, {})


class RequestReplyTests(unittest.TestCase):
    def test_request_frames_and_their_answers_out_of_order(self):
        session = core.Session()
        a, frame = session.ask("svc.a", {"x": 1}, timeout=2.5, key="k1")
        self.assertEqual(__import__("json").loads(frame),
                         {"op": "request", "req": a, "type": "svc.a", "data": {"x": 1}, "timeout": 2500, "key": "k1"})
        b, _ = session.ask("svc.b")
        c, _ = session.request("ping")
        items = session.receive(b'{"op":"ok","req":%d}\n{"op":"error","req":%d,"code":"no_responders","message":"none"}\n'
                                b'{"op":"ok","req":%d,"seq":3,"reply":{"time":"2026-11-29T13:00:00.123Z","pid":5,"uid":6,"gid":7,"data":[1]}}\n'
                                % (c, b, a))
        self.assertEqual([i.req for i in items], [c, b, a])
        self.assertIsInstance(items[1].error, errors.NoResponders)
        answer = core.Response(items[2].frame)
        self.assertEqual((answer.data, answer.pid, answer.uid, answer.gid, answer.seq), ([1], 5, 6, 7, 3))
        self.assertEqual(answer.time.year, 2026)

    def test_request_errors_are_distinct_and_timeout_is_the_requests_own(self):
        session = core.Session()
        reqs = [session.ask("svc.a")[0] for _ in range(4)]
        frames = b"".join(b'{"op":"error","req":%d,"code":"%s","message":"m"%s}\n' % (req, code, extra) for req, code, extra in zip(
            reqs, (b"no_responders", b"no_reply", b"timeout", b"service_error"), (b"", b"", b"", b',"reply":{"pid":9}')))
        errs = [i.error for i in session.receive(frames)]
        self.assertEqual([type(e) for e in errs], [errors.NoResponders, errors.NoReply, errors.RequestTimeout, errors.ServiceError])
        self.assertTrue(all(isinstance(e, errors.RequestError) for e in errs))
        self.assertIsInstance(errs[2], TimeoutError)
        self.assertEqual((errs[3].message, errs[3].reply), ("m", {"pid": 9}))
        self.assertIsInstance(errors.error_from_frame({"code": "timeout"}), errors.FrameTimeout)

    def test_a_frame_too_large_without_req_is_the_oldest_request_not_yet_passed(self):
        session = core.Session()
        waiting, _ = session.ask("svc.a")          # accepted, its answer comes later
        ping, _ = session.request("ping")
        big, _ = session.ask("svc.a")              # too large
        items = session.receive(b'{"op":"ok","req":%d}\n{"op":"error","code":"frame_too_large","message":"m"}\n' % ping)
        self.assertEqual([(i.req, type(i.error)) for i in items], [(ping, type(None)), (big, errors.FrameTooLarge)])
        self.assertEqual(list(session.pending), [waiting])

    def test_an_abandoned_requests_late_answer_is_ignored(self):
        session = core.Session()
        req, _ = session.ask("svc.a")
        session.abandon(req)
        self.assertEqual(session.receive(b'{"op":"error","req":%d,"code":"timeout","message":"m"}\n' % req), [])

    def test_requests_received_carry_token_and_timeout_and_answer_through_the_driver(self):
        session = core.Session()
        answers = []
        session.answer = lambda request, data, error: answers.append((request.token, data, error)) or True
        items = session.receive(b'{"op":"request","seq":4,"type":"svc.a","time":"2026-11-29T13:00:00.123Z","pid":1,"uid":2,"gid":3,'
                                b'"data":{"q":1},"reply":"tok","timeout":1500,"key":"k"}\n{"op":"request","seq":5,"type":"svc.a"}\n')
        request = items[0]
        self.assertIsInstance(request, core.Request)
        self.assertEqual((request.seq, request.data, request.token, request.key), (4, {"q": 1}, "tok", "k"))
        # Received by the broker long ago: its deadline passed while it was queued.
        self.assertEqual(request.timeout, 0.0)
        self.assertTrue(request.reply([1]))
        request.fail("disk full")
        self.assertEqual(answers, [("tok", [1], None), ("tok", None, "disk full")])
        self.assertEqual(items[1].kind, "malformed")

    def test_a_requests_timeout_is_the_time_left_bounded_by_when_the_broker_received_it(self):
        """As ``eventbus serve``: the frame's ``timeout`` is the time left when
        the broker queued it; a first delivery was queued when the broker
        received it (``time``), so that bounds the deadline too."""
        def request(received_ago, timeout_ms=1500, redelivered=False):
            stamp = datetime.datetime.fromtimestamp(time.time() - received_ago, datetime.timezone.utc)
            frame = {"op": "request", "seq": 1, "type": "svc.a", "reply": "t", "timeout": timeout_ms,
                     "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
            if redelivered:
                frame["redelivered"] = True
            return core.Request(frame)
        fresh = request(0)
        self.assertTrue(1.0 < fresh.timeout <= 1.5, fresh.timeout)
        waited = request(1.0, timeout_ms=60_000)             # queued a second ago with a minute left: ~59 s now
        self.assertTrue(55 < waited.timeout <= 59.01, waited.timeout)
        self.assertEqual(request(2.0).timeout, 0.0, "expired while queued")
        again = request(2.0, redelivered=True)               # queued again later: the frame's own bound
        self.assertTrue(1.0 < again.timeout <= 1.5, again.timeout)
        self.assertEqual(core.Request({"op": "request", "seq": 2, "type": "svc.a", "reply": "t"}).timeout > 24, True, "no timeout: the default")

    def test_group_and_serve_go_in_every_subscribe_and_unsubscribe_and_leaving_ends_with_left(self):
        json = __import__("json")
        session = core.Session()
        session.serve, session.group = True, "workers"
        reqs, frames = session.open_subscription(["svc.>"])
        sent = [json.loads(line) for line in frames.splitlines()]
        self.assertEqual(sent[1], {"op": "subscribe", "req": reqs[1], "type": "svc.>", "serve": True, "group": "workers"})
        self.assertRaises(ValueError, session.subscribe_requests, ["a"], since=3)
        session.last_seq = 7
        _, frames = session.resubscribe_requests()
        self.assertNotIn("since", json.loads(frames.splitlines()[0]))
        leave, frames = session.leave_requests()
        self.assertEqual(json.loads(frames), {"op": "unsubscribe", "req": leave[0], "type": "svc.>", "serve": True, "group": "workers"})
        items = session.receive(event_line(8) + b'{"op":"ok","req":%d,"removed":true}\n' % leave[0] + event_line(9))
        self.assertEqual([getattr(i, "seq", None) or i.__class__.__name__ for i in items], [8, "Reply", "Left", 9])

    def test_key_and_group_names_are_checked_before_sending(self):
        session = core.Session()
        self.assertRaises(ValueError, session.publish, "a.b", key="")
        self.assertRaises(ValueError, session.ask, "a.b", key="k" * 256)
        self.assertRaises(ValueError, core.check_group, "bad group")
        _, frame = session.publish("a.b", 1, key="k\u00e9")
        self.assertEqual(__import__("json").loads(frame)["key"], "k\u00e9")
