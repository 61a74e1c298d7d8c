// PROTOCOL.md, Errors: the error frame's shape and each code's cause.
// (slow_consumer is checked in OverflowTests.swift, where it arises.)
//
// Before editing: a case's `req` rule follows PROTOCOL.md, Requests: echoed
// when the frame could be read, absent when it was too large.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

/// One documented error code and a way to cause it.
struct ErrorCase: Sendable, CustomStringConvertible {
    let code: String
    let flags: [String]
    let setup: [String]
    let frame: String
    /// true: reply carries req 1; false: no req; nil: either (PROTOCOL.md leaves it open).
    let echoesReq: Bool?

    var description: String { code }

    static let all = [
        ErrorCase(code: "bad_frame", flags: [], setup: [], frame: #"{"op":"ping","req":1"#, echoesReq: nil),
        ErrorCase(code: "frame_too_large", flags: ["--max-frame", "64"], setup: [], frame: publishFrame(ofSize: 65), echoesReq: false),
        ErrorCase(code: "unknown_op", flags: [], setup: [], frame: #"{"op":"shout","req":1}"#, echoesReq: true),
        ErrorCase(code: "bad_type", flags: [], setup: [], frame: #"{"op":"publish","type":"a..b","req":1}"#, echoesReq: true),
        ErrorCase(code: "bad_request", flags: [], setup: [], frame: #"{"op":"publish","req":1}"#, echoesReq: true),
        ErrorCase(code: "forbidden", flags: [], setup: [], frame: #"{"op":"publish","type":"eventbus.x","req":1}"#, echoesReq: true),
        ErrorCase(
            code: "limit", flags: ["--max-subscriptions", "1"], setup: [#"{"op":"subscribe","type":"a.1","req":0}"#],
            frame: #"{"op":"subscribe","type":"a.2","req":1}"#, echoesReq: true),
    ]
}

@Suite("Errors")
struct ErrorsTests {
    @Test("Each error code comes as {op:error, code, message} for its cause, and the connection stays usable", arguments: ErrorCase.all)
    func errorCodeForItsCause(errorCase: ErrorCase) throws {
        try withBroker(errorCase.flags) { broker in
            let client = try broker.connect()
            for line in errorCase.setup { try client.ok(line) }
            try client.send(errorCase.frame)
            let error = try client.readFrame()
            #expect(error.op == "error", "\(error)")
            #expect(error.code == errorCase.code, "\(error)")
            #expect(error.string("message")?.isEmpty == false, "an error carries a human-readable message: \(error)")
            switch errorCase.echoesReq {
            case true?: #expect(error.req == .integer(1), "\(error)")
            case false?: #expect(!error.has("req"), "\(error)")
            case nil: #expect(error.req == nil || error.req == .integer(1), "\(error)")
            }
            try client.ok(#"{"op":"ping","req":"usable"}"#)
        }
    }
}
