// PROTOCOL.md "Queue groups (1.3)" with full members, against the real
// broker: the credit-aware choice (a member that cannot take an event now is
// passed over), the hold of a full group (a publisher that may be held waits
// until any member has room), and a keyed event waiting for its own member.
// The drop of another uid's events under the next member's own rule is a
// scenario (QueueGroupScenarios.swift: in process and as root).
//
// Before editing: --max-outbound is small (64 KiB) so that queues fill at
// once; a member that must fill up reads nothing, one that must keep up
// reads from its own thread until a marker event of a plain subscription
// (`mark`), which the publisher sends last: events of one publisher arrive
// in order, so every group event before it has arrived. Held publishers
// write from their own thread too (their writes block).
import EventBusScenarios
import EventBusTestSupport
import Foundation
import Glibc
import Testing

@Suite("Queue groups (1.3): flow")
struct QueueGroupFlowTests {
    static let small = ["--max-outbound", "65536"]
    static let pad = String(repeating: "x", count: 400)

    /// `count` publishes of `job.run` with `data.i` from `start`, without `req`
    /// (and with `key(i)` when it gives one), then `mark` with `req` "mark".
    static func flood(count: Int, from start: Int = 0, key: (Int) -> String? = { _ in nil }) -> [UInt8] {
        var text = ""
        for i in start..<start + count {
            let keyField = key(i).map { #","key":"\#($0)""# } ?? ""
            text += #"{"op":"publish","type":"job.run","data":{"i":\#(i),"p":"\#(pad)"}\#(keyField)}"# + "\n"
        }
        text += #"{"op":"publish","type":"mark","req":"mark"}"# + "\n"
        return Array(text.utf8)
    }

    /// Sends `bytes` from its own thread and reads to the `mark` reply.
    static func publish(_ publisher: RawClient, _ bytes: [UInt8], group: DispatchGroup) {
        let handoff = RobustHandoff(publisher)
        robustThread(group) {
            do {
                try handoff.client.sendBytes(bytes, timeout: .seconds(120))
                _ = try handoff.client.readFrames(until: { $0.req == .string("mark") }, timeout: .seconds(120))
            } catch {
                Issue.record("publisher: \(error)")
            }
        }
    }

    /// Reads frames on its own thread until the `mark` event; they land in `into`.
    static func read(_ member: RawClient, into frames: RobustShared<[Frame]>, group: DispatchGroup) {
        let handoff = RobustHandoff(member)
        robustThread(group) {
            do {
                let read = try handoff.client.readFrames(until: { $0.op == "event" && $0.type == "mark" }, timeout: .seconds(120))
                frames.withLock { $0 = read }
            } catch {
                Issue.record("member: \(error)")
            }
        }
    }

    /// A member of `workers` on `job.>` that also gets `mark` by a plain subscription.
    static func member(_ broker: BrokerProcess) throws -> RawClient {
        let member = try broker.connect()
        try QueueGroupSteps.join(member, "job.>", group: "workers")
        try member.subscribe("mark")
        return member
    }

    /// The `data.i` of the `job.run` events among `frames`.
    static func jobs(_ frames: [Frame]) -> [Int] {
        frames.filter { $0.op == "event" && $0.type == "job.run" }.compactMap { $0.object("data")?["i"] as? Int }
    }

    /// The sum of the `count`s of the `dropped` notices among `frames`.
    static func dropped(_ frames: [Frame]) -> Int {
        frames.filter { $0.op == "dropped" }.reduce(0) { $0 + ($1.int("count") ?? 0) }
    }

    // MARK: Credit-aware choice

    @Test("A member that cannot take an event now is passed over (a stalled member never holds up a group in which another member reads): nothing is lost")
    func aFullMemberIsPassedOver() throws {
        try withBroker(QueueGroupFlowTests.small + ["--stall-timeout", "60s"]) { broker in
            let stalled = try QueueGroupFlowTests.member(broker)  // reads nothing until the end
            let reader = try QueueGroupFlowTests.member(broker)
            let publisher = try broker.connect()
            let threads = DispatchGroup()
            let read = RobustShared<[Frame]>([])
            QueueGroupFlowTests.read(reader, into: read, group: threads)
            let count = 4_000
            QueueGroupFlowTests.publish(publisher, QueueGroupFlowTests.flood(count: count), group: threads)
            guard threads.wait(timeout: .now() + 180) == .success else { throw TestFailure("the publisher or the reader did not finish") }
            let taken = QueueGroupFlowTests.jobs(read.value)
            let stalledFrames = try stalled.readFrames(until: { $0.op == "event" && $0.type == "mark" }, timeout: .seconds(60))
            let left = QueueGroupFlowTests.jobs(stalledFrames)
            #expect(Set(taken).isDisjoint(with: left), "an event went to two members")
            let all = (taken + left).sorted() == Array(0..<count)
            #expect(all, "every event reached one member; missing \(rangeSummary(Array(Set(0..<count).subtracting(taken + left)).sorted()))")
            let ordered = taken == taken.sorted() && left == left.sorted()
            #expect(ordered, "in order at each member")
            #expect(left.count < count / 4, "the stalled member was passed over once full: it got \(left.count) of \(count)")
            #expect(QueueGroupFlowTests.dropped(read.value + stalledFrames) == 0)
            #expect(try publisher.stats().int("dropped") == 0)
        }
    }

    @Test("A full group holds a publisher of its members' uid until a member has room, then the event goes to the first in turn that can take it: nothing is lost")
    func aFullGroupHoldsItsUidsPublisher() throws {
        try withBroker(QueueGroupFlowTests.small + ["--stall-timeout", "60s"]) { broker in
            let members = try (0..<2).map { _ in try QueueGroupFlowTests.member(broker) }
            let publisher = try broker.connect()
            let threads = DispatchGroup()
            let count = 4_000
            QueueGroupFlowTests.publish(publisher, QueueGroupFlowTests.flood(count: count), group: threads)
            let observer = try broker.connect()
            var last = -1
            try waitUntil("the publisher to be held by the full group", timeout: .seconds(60)) {
                let stats = try observer.stats()
                defer { last = stats.int("published") ?? -1 }
                return stats.int("held") == 1 && stats.int("published") == last
            }
            let published = try observer.stats().int("published") ?? 0
            #expect(published < count, "held before the end: \(published) published")
            let frames = (0..<2).map { _ in RobustShared<[Frame]>([]) }
            for (member, into) in zip(members, frames) { QueueGroupFlowTests.read(member, into: into, group: threads) }
            guard threads.wait(timeout: .now() + 180) == .success else { throw TestFailure("the publisher or the members did not finish") }
            let shares = frames.map { QueueGroupFlowTests.jobs($0.value) }
            #expect(Set(shares[0]).isDisjoint(with: shares[1]))
            let all = (shares[0] + shares[1]).sorted() == Array(0..<count)
            #expect(all, "every event reached one member; missing \(rangeSummary(Array(Set(0..<count).subtracting(shares[0] + shares[1])).sorted()))")
            #expect(QueueGroupFlowTests.dropped(frames[0].value + frames[1].value) == 0)
            let stats = try observer.stats()
            #expect(stats.int("dropped") == 0 && (stats.int("holds") ?? 0) > 0 && stats.int("held") == 0, "\(stats.raw)")
        }
    }

    // MARK: Keys

    /// Which member (index) got each key, from one event per key; each
    /// member's frames are read by a settle.
    static func keyMap(_ members: [RawClient], _ publisher: RawClient, keys: Range<Int>, round: Int) throws -> [Int: Int] {
        _ = try QueueGroupSteps.publish(publisher, "job.run", keys, key: { "k\($0)" })
        var map: [Int: Int] = [:]
        for (m, member) in members.enumerated() {
            for frame in try member.settle() where frame.op == "event" {
                guard let key = frame.string("key"), let i = frame.object("data")?["i"] as? Int, key == "k\(i)" else {
                    throw TestFailure("round \(round): a keyed event without its key: \(frame.raw)")
                }
                if let other = map[i] { throw TestFailure("round \(round): key k\(i) reached members \(other) and \(m)") }
                map[i] = m
            }
        }
        return map
    }

    @Test("Events with one key reach one member of each group, in order")
    func eventsWithOneKeyReachOneMemberInOrder() throws {
        try withBroker { broker in
            let members = try (0..<3).map { _ in try QueueGroupFlowTests.member(broker) }
            let publisher = try broker.connect()
            _ = try QueueGroupSteps.publish(publisher, "job.run", 0..<90, key: { "k\($0 % 10)" })
            var owner: [String: Int] = [:]
            for (m, member) in members.enumerated() {
                let events = try member.settle().filter { $0.op == "event" }
                for event in events {
                    let key = try #require(event.string("key"))
                    #expect(owner[key, default: m] == m, "key \(key) reached members \(owner[key]!) and \(m)")
                    owner[key] = m
                }
                for k in 0..<10 {
                    let mine = QueueGroupSteps.indices(events.filter { $0.string("key") == "k\(k)" })
                    #expect(mine == mine.sorted(), "key k\(k) in order")
                }
            }
            #expect(owner.count == 10 && Set(owner.values).count > 1, "every key went somewhere, and not all to one member: \(owner)")
        }
    }

    @Test("Rendezvous hashing: when a member leaves only its keys move; when one joins it takes only keys that now hash to it")
    func onlyALeavingMembersKeysMoveAndAJoiningOneTakesOnlyItsOwn() throws {
        try withBroker { broker in
            var members = try (0..<3).map { _ in try QueueGroupFlowTests.member(broker) }
            let publisher = try broker.connect()
            let keys = 0..<200
            let before = try QueueGroupFlowTests.keyMap(members, publisher, keys: keys, round: 1)
            #expect(before.count == keys.count && Set(before.values) == [0, 1, 2], "\(before)")
            try members[2].ok(#"{"op":"unsubscribe","type":"job.>","group":"workers","req":"leave"}"#)
            let after = try QueueGroupFlowTests.keyMap(members, publisher, keys: keys, round: 2)
            for k in keys {
                if before[k] == 2 {
                    #expect(after[k] == 0 || after[k] == 1, "k\(k) of the member that left went to \(String(describing: after[k]))")
                } else {
                    #expect(after[k] == before[k], "k\(k) moved from \(before[k]!) to \(String(describing: after[k])) though its member stayed")
                }
            }
            members.append(try QueueGroupFlowTests.member(broker))
            let joined = try QueueGroupFlowTests.keyMap(members, publisher, keys: keys, round: 3)
            var taken = 0
            for k in keys where joined[k] != after[k] {
                #expect(joined[k] == 3, "k\(k) moved from \(after[k]!) to \(String(describing: joined[k])), not to the member that joined")
                taken += 1
            }
            #expect(taken > 0, "the member that joined took some keys")
        }
    }

    @Test("A keyed event is not given to another member because its member is full: it waits under that member's rule (held until it is behind, then dropped, counted and told)")
    func aKeyedEventWaitsForItsMember() throws {
        try withBroker(QueueGroupFlowTests.small + ["--stall-timeout", "300ms"]) { broker in
            let members = try (0..<2).map { _ in try QueueGroupFlowTests.member(broker) }
            let publisher = try broker.connect()
            // Keys of member 0, found with one event each.
            let map = try QueueGroupFlowTests.keyMap(members, publisher, keys: 0..<40, round: 1)
            let mine = map.filter { $0.value == 0 }.keys.sorted()
            try #require(!mine.isEmpty)
            let count = 4_000
            let threads = DispatchGroup()
            let other = RobustShared<[Frame]>([])
            QueueGroupFlowTests.read(members[1], into: other, group: threads)
            QueueGroupFlowTests.publish(publisher, QueueGroupFlowTests.flood(count: count, from: 1_000, key: { "k\(mine[$0 % mine.count])" }), group: threads)
            guard threads.wait(timeout: .now() + 180) == .success else { throw TestFailure("the publisher did not finish once the member was behind") }
            let stolen = QueueGroupFlowTests.jobs(other.value).count
            #expect(stolen == 0, "none of member 0's keys went to member 1")
            let frames = try members[0].readFrames(until: { $0.op == "event" && $0.type == "mark" }, timeout: .seconds(60))
            let got = QueueGroupFlowTests.jobs(frames)
            let dropped = QueueGroupFlowTests.dropped(frames)
            let ordered = got == got.sorted()
            #expect(ordered && got.count + dropped == count && dropped > 0, "\(got.count) events and \(dropped) dropped of \(count)")
            let stats = try publisher.stats()
            #expect((stats.int("stalls") ?? 0) > 0 && (stats.int("holds") ?? 0) > 0, "held, then released when the member went behind: \(stats.raw)")
        }
    }

    // MARK: Redelivery

    @Test("A member that closes with group events queued but not yet written at all: those go to the other members, in order, with redelivered: true")
    func aClosingMembersUnwrittenEventsAreRedelivered() throws {
        try withBroker(QueueGroupFlowTests.small + ["--stall-timeout", "60s"]) { broker in
            let closing = try QueueGroupFlowTests.member(broker)  // reads nothing, then closes
            // Two that read: a redelivered copy is longer, so one queue might not take them all.
            let readers = try (0..<2).map { _ in try QueueGroupFlowTests.member(broker) }
            let publisher = try broker.connect()
            let threads = DispatchGroup()
            let reads = (0..<2).map { _ in RobustShared<[Frame]>([]) }
            for (reader, into) in zip(readers, reads) { QueueGroupFlowTests.read(reader, into: into, group: threads) }
            let count = 6_000
            QueueGroupFlowTests.publish(publisher, QueueGroupFlowTests.flood(count: count), group: threads)
            guard threads.wait(timeout: .now() + 180) == .success else { throw TestFailure("the publisher or the readers did not finish") }
            let before = reads.flatMap { QueueGroupFlowTests.jobs($0.value) }
            #expect(reads.allSatisfy { $0.value.allSatisfy { $0.has("redelivered") == false } })
            closing.close()
            try waitUntil("the broker to forget the closed member") { try publisher.stats().int("connections") == 3 }
            let later = try readers.map { try $0.settle() }
            let redelivered = later.flatMap { QueueGroupFlowTests.jobs($0) }
            #expect(!redelivered.isEmpty && later.joined().allSatisfy { $0.op != "event" || $0.bool("redelivered") == true }, "each redelivered event says so")
            #expect(Set(redelivered).isDisjoint(with: before), "a redelivered event is one no reader had")
            let ordered = later.allSatisfy { QueueGroupFlowTests.jobs($0) == QueueGroupFlowTests.jobs($0).sorted() }
            #expect(ordered, "in their order")
            // The closed member's share: what its socket held (lost), then what was queued (redelivered).
            let lost = Set(0..<count).subtracting(before).subtracting(redelivered)
            #expect(!lost.isEmpty && lost.max()! < redelivered.min() ?? 0, "only what the kernel held for it is lost: lost \(rangeSummary(lost.sorted()))")
            #expect(QueueGroupFlowTests.dropped(reads.flatMap(\.value) + later.joined()) == 0)
        }
    }

    @Test("A serving member that closes with requests of its group queued but not yet written at all: another member gets each, with a new token, the time left and redelivered: true; a partly written one gets no_reply")
    func aClosingServersUnwrittenRequestsAreRedelivered() throws {
        try withBroker { broker in
            // C first in join order, then A and B: requests 0..5 go C, A, B, C, A, B.
            let servers = try (0..<3).map { _ in try broker.connect() }
            for server in servers {
                try server.ok(#"{"op":"subscribe","type":"svc.>","serve":true,"group":"pool","req":"s"}"#)
            }
            let (closing, readers) = (servers[0], Array(servers[1...]))
            // 600 KB each: more than a socket buffer holds, so the closing
            // member's first request is partly written and its second not at all.
            let pad = String(repeating: "x", count: 600_000)
            let requester = try broker.connect()
            for n in 0..<6 {
                try requester.send(#"{"op":"request","type":"svc.job","data":{"n":\#(n),"p":"\#(pad)"},"timeout":60000,"req":\#(n)}"#)
            }
            #expect(try requester.settle().isEmpty, "every request reached a server")
            closing.close()
            let observer = try broker.connect()
            try waitUntil("the broker to forget the closed member") { try observer.stats().int("connections") == 4 }
            var given: [Int: Frame] = [:]
            for reader in readers {
                for frame in try reader.settle() where frame.op == "request" {
                    let n = frame.object("data")?["n"] as? Int ?? -1
                    given[n] = frame
                    let accepted = try reader.ok(#"{"op":"reply","to":"\#(frame.string("reply") ?? "")","data":\#(n),"req":"r"}"#)
                    #expect(accepted.bool("accepted") == true, "reply to \(n): \(accepted)")
                }
            }
            #expect(given.keys.sorted() == [1, 2, 3, 4, 5], "the two left got their own and the closed member's unwritten one")
            let redelivered = given.filter { $0.value.bool("redelivered") == true }.map(\.key)
            #expect(redelivered == [3], "only request 3 comes redelivered: \(redelivered)")
            if let again = given[3] {
                let timeout = again.int("timeout") ?? 0
                #expect(timeout > 0 && timeout <= 60000, "the time left: \(timeout)")
            }
            var answers: [Int: Frame] = [:]
            for frame in try requester.readFrames(count: 6, timeout: .seconds(60)) {
                if case .integer(let n) = frame.req { answers[n] = frame }
            }
            #expect(answers[0]?.string("code") == "no_reply", "the partly written request: \(String(describing: answers[0]))")
            for n in 1..<6 {
                #expect(answers[n]?.op == "ok" && answers[n]?.object("reply")?["data"] as? Int == n, "answer \(n): \(String(describing: answers[n]))")
            }
        }
    }
}
