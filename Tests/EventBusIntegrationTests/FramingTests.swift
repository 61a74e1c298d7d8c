// PROTOCOL.md, Framing: LF-terminated JSON objects, CR, blank lines, EOF,
// the frame size limit, nesting, duplicate keys, numbers, invalid input.
//
// Before editing: after every rejected frame, check the connection is still
// usable and that a `>` subscriber got nothing (the broker never forwards a
// byte it has not validated).
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Framing")
struct FramingTests {
    @Test("Several LF-terminated frames in one write are each handled, in order")
    func framesInOneWriteAreEachHandled() throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.sendRaw(#"{"op":"ping","req":1}"# + "\n" + #"{"op":"ping","req":2}"# + "\n" + #"{"op":"ping","req":3}"# + "\n")
            let replies = try client.readFrames(count: 3)
            #expect(replies.map(\.op) == ["ok", "ok", "ok"])
            #expect(replies.map(\.req) == [.integer(1), .integer(2), .integer(3)])
        }
    }

    @Test("A CR before the LF is tolerated")
    func crBeforeLFIsTolerated() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("crlf.x")
            let client = try broker.connect()
            try client.sendRaw(#"{"op":"publish","type":"crlf.x","data":[1],"req":"p"}"# + "\r\n" + #"{"op":"ping","req":"q"}"# + "\r\n")
            let replies = try client.readFrames(count: 2)
            #expect(replies.map(\.op) == ["ok", "ok"])
            #expect(replies.map(\.req) == [.string("p"), .string("q")])
            let event = try subscriber.readFrame()
            #expect(event.op == "event" && event.type == "crlf.x")
        }
    }

    @Test("Blank lines are ignored")
    func blankLinesAreIgnored() throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.sendRaw("\n\n\r\n\n")
            try client.sendRaw(#"{"op":"ping","req":"after-blanks"}"# + "\n\n")
            let reply = try client.readFrame()
            #expect(reply.op == "ok" && reply.req == .string("after-blanks"), "\(reply)")
            try client.expectNoFrame()
        }
    }

    @Test("At EOF, a last frame without its LF is handled as if it had one")
    func lastFrameWithoutLFIsHandledAtEOF() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("eof.x")
            let client = try broker.connect()
            try client.sendRaw(#"{"op":"publish","type":"eof.x","data":"no-lf","req":"last"}"#)
            try client.shutdownWrite()
            let frames = try client.readUntilEOF()
            #expect(frames.count == 1)
            #expect(frames.first?.op == "ok" && frames.first?.req == .string("last"))
            let event = try subscriber.readFrame()
            #expect(event.op == "event" && event.string("data") == "no-lf")
        }
    }

    @Test("A frame split across many writes, byte by byte, is handled once whole")
    func frameSplitByteByByteIsReassembled() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("split.x")
            let client = try broker.connect()
            let frame = Array(#"{"op":"publish","type":"split.x","data":{"k":[1,2,3],"s":"ünï"},"req":"bytes"}"#.utf8) + [0x0A]
            for byte in frame {
                try client.sendBytes([byte])
                usleep(1_000)  // pacing, so the broker sees many short reads
            }
            let reply = try client.readFrame()
            #expect(reply.op == "ok" && reply.req == .string("bytes"), "\(reply)")
            let event = try subscriber.readFrame()
            #expect(event.raw.contains(#"{"k":[1,2,3],"s":"ünï"}"#), "\(event)")
            try client.expectNoFrame()
        }
    }

    @Test("A 1 MiB + 1 byte frame gets frame_too_large without req, and the next frame is handled")
    func oversizedFrameIsRejectedAndTheConnectionStaysUsable() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(">")
            let client = try broker.connect()
            try client.send(publishFrame(ofSize: 1_048_577, type: "big.too", req: 9))
            try client.send(#"{"op":"ping","req":"after"}"#)
            let error = try client.readFrame()
            #expect(error.op == "error" && error.code == "frame_too_large", "\(error.raw.prefix(300))")
            #expect(!error.has("req"), "a frame too large is answered without req")
            let reply = try client.readFrame()
            #expect(reply.op == "ok" && reply.req == .string("after"))
            try subscriber.expectNoFrame()
        }
    }

    @Test("A frame of exactly 1 MiB is accepted by default, and its event may exceed the limit")
    func frameOfExactlyOneMiBIsAccepted() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("big.fit")
            let client = try broker.connect()
            let reply = try client.request(publishFrame(ofSize: 1_048_576, type: "big.fit", req: 3))
            #expect(reply.op == "ok", "\(reply)")
            let event = try subscriber.readFrame()
            #expect(event.op == "event")
            #expect(event.raw.utf8.count > 1_048_576 - 60)
        }
    }

    @Test("--max-frame counts the bytes before the LF or CRLF")
    func maxFrameCountsBytesBeforeTheLineEnd() throws {
        try withBroker(["--max-frame", "200"]) { broker in
            let client = try broker.connect()
            #expect(try client.request(publishFrame(ofSize: 200, type: "lim.x", req: 1)).op == "ok")
            try client.sendRaw(publishFrame(ofSize: 200, type: "lim.x", req: 2) + "\r\n")
            let crlf = try client.readFrame()
            #expect(crlf.op == "ok" && crlf.req == .integer(2), "a CR before the LF is not counted: \(crlf)")
            try client.send(publishFrame(ofSize: 201, type: "lim.x", req: 3))
            let error = try client.readFrame()
            #expect(error.op == "error" && error.code == "frame_too_large" && !error.has("req"), "\(error)")
            try client.ok(#"{"op":"ping","req":4}"#)
        }
    }

    /// Not a raw CR (issue 20: a line reader with universal newlines splits
    /// there; PROTOCOL-NOTES.md "Framing"; AttackRound2StateTests).
    @Test("Whitespace other than LF and CR is allowed and kept in data")
    func otherWhitespaceIsAllowedAndKept() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("ws.x")
            let client = try broker.connect()
            let data = "{ \"a\" :\t[ 1 ,  2 ] }"
            try client.ok("{ \"op\" : \"publish\",\t\"type\":\"ws.x\" , \"req\":1, \"data\" : \(data) }")
            let event = try subscriber.readFrame()
            #expect(event.raw.contains(data), "\(event)")
        }
    }

    @Test("Nesting 512 levels deep (the envelope is level 1) is accepted and forwarded")
    func nesting512LevelsIsAccepted() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("deep.x")
            let client = try broker.connect()
            let data = String(repeating: "[", count: 511) + String(repeating: "]", count: 511)
            let reply = try client.request(#"{"op":"publish","type":"deep.x","req":1,"data":\#(data)}"#)
            #expect(reply.op == "ok", "\(reply)")
            let line = String(decoding: try subscriber.readLine(), as: UTF8.self)
            #expect(line.contains(data))
        }
    }

    @Test("Nesting 513 levels deep is bad_frame, and nothing is forwarded")
    func nesting513LevelsIsBadFrame() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(">")
            let client = try broker.connect()
            let data = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
            try client.send(#"{"op":"publish","type":"deep.x","data":\#(data)}"#)
            let error = try client.readFrame()
            #expect(error.op == "error" && error.code == "bad_frame", "\(error)")
            try client.ok(#"{"op":"ping","req":2}"#)
            try subscriber.expectNoFrame()
        }
    }

    static let duplicateEnvelopes = [
        #"{"op":"ping","op":"ping","req":1}"#,
        #"{"op":"publish","type":"dup.a","type":"dup.b","req":1}"#,
        #"{"op":"publish","type":"dup.a","data":1,"data":2,"req":1}"#,
    ]

    @Test("Duplicate keys in the envelope are bad_request", arguments: duplicateEnvelopes)
    func duplicateEnvelopeKeysAreBadRequest(frame: String) throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(">")
            let client = try broker.connect()
            let error = try client.error(frame)
            #expect(error.code == "bad_request", "\(error)")
            try subscriber.expectNoFrame()
        }
    }

    @Test("A frame of 85,000 distinct unknown keys (924 KB) is answered as its op; with one repeated, bad_request")
    func manyUnknownKeysAreCheckedForDuplicates() throws {
        // Issue 11: duplicate detection used to be quadratic in the number of
        // keys (4.3 s of broker CPU for this frame); its cost is measured in
        // scripts, this checks the answers.
        let keys = (0..<85_000).map { "\"k\($0)\":1" }.joined(separator: ",")
        try withBroker { broker in
            let client = try broker.connect()
            let ok = try client.ok("{\(keys),\"op\":\"ping\",\"req\":\"many\"}", timeout: .seconds(30))
            #expect(ok.req == .string("many"))
            let error = try client.error("{\(keys),\"op\":\"ping\",\"req\":2,\"k42\":2}", timeout: .seconds(30))
            #expect(error.code == "bad_request" && error.req == .integer(2), "\(error)")
            #expect(error.string("message")?.contains(#""k42""#) == true, "\(error)")
            try client.ok(#"{"op":"ping","req":3}"#)
        }
    }

    @Test("Among 85,000 unknown keys the earliest repeat in frame order is named, written with escapes or not")
    func theEarliestRepeatAmongManyKeysIsNamed() throws {
        // Issue 20: the check runs after the scan, over all the keys at once
        // (UnknownKeys.swift); the first repeat in frame order is the one named.
        var members = (0..<85_000).map { "\"k\($0)\":1" }
        members.insert(#""\u006b7":2"#, at: 50_000)
        members.append(#""type":1,"k3":2,"type":2"#)
        try withBroker { broker in
            let client = try broker.connect()
            let error = try client.error("{" + members.joined(separator: ",") + #","op":"ping","req":5}"#, timeout: .seconds(30))
            #expect(error.code == "bad_request" && error.req == .integer(5), "\(error)")
            #expect(error.string("message") == #"duplicate key "k7" in frame"#, "\(error)")
            try client.ok(#"{"op":"ping","req":6}"#)
        }
    }

    @Test("Duplicate keys inside data are forwarded as sent")
    func duplicateKeysInsideDataAreForwarded() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("dup.data")
            let client = try broker.connect()
            try client.publish("dup.data", data: #"{"k":1,"k":2}"#)
            let line = String(decoding: try subscriber.readLine(), as: UTF8.self)
            #expect(line.contains(#"{"k":1,"k":2}"#), "\(line)")
        }
    }

    static let hugeNumbers = [
        "1e400", "-1E-400", "123456789012345678901234567890123456789012345678901234567890",
        "-0.000000000000000000000000000000000000000000000000000000001", "[1e999999,-0,0.0e+0]",
    ]

    @Test("Numbers of any magnitude that match the RFC 8259 grammar are valid and forwarded as written", arguments: hugeNumbers)
    func hugeNumbersAreValid(number: String) throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("num.x")
            let client = try broker.connect()
            let reply = try client.request(#"{"op":"publish","type":"num.x","req":1,"data":\#(number)}"#)
            #expect(reply.op == "ok", "\(reply)")
            // JSONSerialization cannot hold 1e400: check the raw line.
            let line = String(decoding: try subscriber.readLine(), as: UTF8.self)
            #expect(line.contains("event") && line.contains(number), "\(line)")
        }
    }

    static let invalidUTF8: [[UInt8]] = [
        [0xFF],  // never valid
        [0xC3, 0x28],  // bad continuation
        [0xC0, 0xAF],  // overlong "/"
        [0xED, 0xA0, 0x80],  // UTF-16 surrogate
        [0xF4, 0x90, 0x80, 0x80],  // beyond U+10FFFF
        [0xE2, 0x82],  // truncated sequence before the closing quote
    ]

    @Test("Invalid UTF-8 is bad_frame, nothing is forwarded, and the connection stays usable", arguments: invalidUTF8)
    func invalidUTF8IsBadFrame(bytes: [UInt8]) throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(">")
            let client = try broker.connect()
            let frame = Array(#"{"op":"publish","type":"utf.x","data":"a"#.utf8) + bytes + Array(#"b"}"#.utf8) + [0x0A]
            try client.sendBytes(frame)
            let error = try client.readFrame()
            #expect(error.op == "error" && error.code == "bad_frame", "\(error)")
            try client.ok(#"{"op":"ping","req":"usable"}"#)
            try subscriber.expectNoFrame()
        }
    }

    @Test("Invalid UTF-8 in an envelope key is bad_frame")
    func invalidUTF8InAKeyIsBadFrame() throws {
        try withBroker { broker in
            let client = try broker.connect()
            try client.sendBytes(Array(#"{"op":"ping",""#.utf8) + [0xFE] + Array(#"":1}"#.utf8) + [0x0A])
            let error = try client.readFrame()
            #expect(error.op == "error" && error.code == "bad_frame", "\(error)")
            try client.ok(#"{"op":"ping","req":"usable"}"#)
        }
    }

    static let notObjects = [
        #"[1,2]"#, #""op""#, "42", "null", "true",
        #"{"op":"ping""#, #"{op:"ping"}"#, #"{"op":"ping"} {"op":"ping"}"#, #"{"op":"ping",}"#,
        "{\"op\":\"pi\tng\"}", #"{"op":"ping","x":01}"#, #"{"op":"ping","x":NaN}"#, #"{"op":'ping'}"#,
        #"{"op":"ping","x":"\q"}"#, #"{"op":"ping","x":1.}"#,
    ]

    @Test("A frame that is not valid JSON or not an object is bad_frame, and the connection stays usable", arguments: notObjects)
    func invalidJSONIsBadFrame(frame: String) throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe(">")
            let client = try broker.connect()
            try client.send(frame)
            let error = try client.readFrame()
            #expect(error.op == "error" && error.code == "bad_frame", "\(error)")
            try client.ok(#"{"op":"ping","req":"usable"}"#)
            try subscriber.expectNoFrame()
        }
    }

    @Test("Unknown fields are ignored")
    func unknownFieldsAreIgnored() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("unk.x")
            let client = try broker.connect()
            try client.ok(#"{"op":"ping","req":1,"future":{"x":[1,2]},"zzz":null}"#)
            try client.ok(#"{"op":"publish","type":"unk.x","req":2,"data":7,"priority":"high"}"#)
            let event = try subscriber.readFrame()
            #expect(event.op == "event" && event.int("data") == 7)
        }
    }

    @Test("An unknown op is answered with unknown_op")
    func unknownOpIsUnknownOp() throws {
        try withBroker { broker in
            let client = try broker.connect()
            let error = try client.error(#"{"op":"frobnicate","req":5}"#)
            #expect(error.code == "unknown_op")
            try client.ok(#"{"op":"ping","req":6}"#)
        }
    }
}
