// PROTOCOL.md, Events: the event envelope (seq, time, source, id, pid, uid,
// gid), SO_PEERCRED credentials, and data forwarded byte for byte.
//
// Before editing: publishers in other processes are run with socat through
// `runProcess`, whose result carries the child's pid to compare with the event.
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Events")
struct EventsTests {
    @Test("An event carries op, seq, type, time, source, id, pid, uid, gid and data")
    func eventCarriesTheWholeEnvelope() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("order.created")
            let publisher = try broker.connect()
            let instance = try #require(publisher.ok(#"{"op":"hello","client":"billing-1","req":0}"#).string("instance"))
            let receipt = try publisher.publish("order.created", data: #"{"n":1}"#)
            let event = try subscriber.readFrame()
            #expect(event.op == "event")
            #expect(event.seq == receipt.seq)
            #expect(event.type == "order.created")
            let time = try #require(event.string("time"), "\(event)")
            #expect(isRFC3339UTCMillis(time), "time \(time)")
            #expect(event.string("source") == "billing-1", "source defaults to the client name: \(event)")
            #expect(event.string("id") == "\(instance)-\(receipt.seq)", "id defaults to <instance>-<seq>: \(event)")
            #expect(event.int("pid") == Int(getpid()))
            #expect(event.int("uid") == Int(getuid()))
            #expect(event.int("gid") == Int(getgid()))
            #expect(event.raw.contains(#"{"n":1}"#))
        }
    }

    @Test("time is stamped by the broker on receipt, in UTC")
    func timeIsStampedOnReceipt() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("clock.x")
            let before = Date()
            try broker.connect().publish("clock.x")
            let after = Date()
            let event = try subscriber.readFrame()
            let text = try #require(event.string("time"))
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let stamped = try #require(formatter.date(from: text), "unparsable time \(text)")
            #expect(stamped >= before.addingTimeInterval(-1) && stamped <= after.addingTimeInterval(1), "\(text)")
        }
    }

    @Test("Without hello's client name, source is pid/<pid>")
    func sourceDefaultsToPid() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("anon.x")
            try broker.connect().publish("anon.x")
            #expect(try subscriber.readFrame().string("source") == "pid/\(getpid())")
        }
    }

    @Test("source and id are kept as the publisher gave them")
    func sourceAndIdAreKept() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("given.x")
            let publisher = try broker.connect()
            try publisher.ok(#"{"op":"hello","client":"named","req":0}"#)
            try publisher.ok(#"{"op":"publish","type":"given.x","source":"billing","id":"3f9a1c07-42","req":1}"#)
            let event = try subscriber.readFrame()
            #expect(event.string("source") == "billing" && event.string("id") == "3f9a1c07-42", "\(event)")
        }
    }

    @Test("A subscriber sees strictly increasing seq, equal to each publish reply's seq")
    func seqIncreasesAndMatchesTheReply() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("count.>")
            let publisher = try broker.connect()
            var seqs: [Int] = []
            for i in 0..<20 {
                seqs.append(try publisher.publish(i % 2 == 0 ? "count.even" : "count.odd", data: "\(i)", req: i).seq)
                try publisher.publish("unrelated.x", req: 100 + i)
            }
            let events = try subscriber.readFrames(count: 20)
            #expect(events.compactMap(\.seq) == seqs)
            #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 })
        }
    }

    @Test("pid, uid and gid are the publisher's SO_PEERCRED and cannot be forged")
    func credentialsCannotBeForged() throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("cred.x")
            try broker.connect().ok(#"{"op":"publish","type":"cred.x","pid":1,"uid":4242,"gid":4242,"req":1}"#)
            let event = try subscriber.readFrame()
            #expect(event.int("pid") == Int(getpid()) && event.int("uid") == Int(getuid()) && event.int("gid") == Int(getgid()), "\(event)")
        }
    }

    @Test("An event from another process carries that process's pid")
    func credentialsComeFromThePublisherProcess() throws {
        let socat = try #require(findInPath("socat"), "socat is needed (scripts/deps installs it)")
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("proc.x")
            let run = try runProcess(
                socat, ["-t", "5", "-", "UNIX-CONNECT:\(broker.socketPath)"],
                stdin: #"{"op":"publish","type":"proc.x","req":1}"# + "\n", timeout: .seconds(20))
            #expect(run.status == .exited(0), "socat: \(run.stderr)")
            let event = try subscriber.readFrame()
            #expect(event.int("pid") == Int(run.pid), "\(event)")
            #expect(event.string("source") == "pid/\(run.pid)", "\(event)")
        }
    }

    @Test("An event from another user carries that user's uid and gid", .enabled(if: getuid() == 0 && findInPath("setpriv") != nil))
    func credentialsCarryTheOtherUsersIds() throws {
        let socat = try #require(findInPath("socat"), "socat is needed (scripts/deps installs it)")
        try withBroker { broker in
            // Let user 65534 reach the 0666 socket inside our 0700 temporary directory.
            chmod(broker.directory.path, 0o755)
            let subscriber = try broker.connect()
            try subscriber.subscribe("user.x")
            let run = try runProcess(
                "setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", socat, "-t", "5", "-", "UNIX-CONNECT:\(broker.socketPath)"],
                stdin: #"{"op":"publish","type":"user.x","req":1}"# + "\n", timeout: .seconds(20))
            #expect(run.status == .exited(0), "setpriv socat: \(run.stderr)")
            #expect(run.stdout.contains("\"ok\""), "\(run.stdout)")
            let event = try subscriber.readFrame()
            #expect(event.int("uid") == 65534 && event.int("gid") == 65534 && event.int("pid") == Int(run.pid), "\(event)")
        }
    }

    static let dataTexts = [
        #"{"b":1,"a":2}"#, #""\u00e9\n\/""#, "1.0E+2", "[ ]", #""é""#, #"{"nested":{"deep":[true,false,null]}}"#, "-0",
        #""\ud83d\ude00""#, #""line\u2028sep""#,
    ]

    @Test("data is forwarded byte for byte, not re-serialised", arguments: dataTexts)
    func dataIsForwardedByteForByte(data: String) throws {
        try withBroker { broker in
            let subscriber = try broker.connect()
            try subscriber.subscribe("bytes.x")
            try broker.connect().publish("bytes.x", data: data)
            let event = try subscriber.readFrame()
            #expect(event.op == "event")
            #expect(event.raw.contains(data), "sent data \(data), got \(event.raw)")
        }
    }
}
