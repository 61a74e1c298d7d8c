// The bound on one queue group's members (`QuotaConfiguration.maxGroupMembers`,
// `--max-group-members`; PROTOCOL-NOTES.md "Queue groups": members of one
// group): the join past it is `limit` naming the option, told to the log,
// and leaves no membership behind; the bound is per group (a serving group
// of the same name, another name, another uid's group each count their own),
// a leave makes room, and uid 0 has none.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Queue group members bound")
struct GroupMembersLimitTests {
    @Test("A join past --max-group-members is limit, logged, and no member; other groups and uid 0 count their own")
    func joinPastTheBoundIsRefused() throws {
        let h = BrokerHarness { $0.quotas.maxGroupMembers = 3 }
        let workers = (0..<5).map { _ in h.connect(uid: 2000, gid: 2000) }
        for (n, worker) in workers.enumerated() { h.send(worker, #"{"op":"subscribe","type":"job.>","group":"w","req":\#(n)}"#) }
        let replies = workers.map { h.read($0).last }
        #expect(replies.prefix(3).allSatisfy { $0?.op == "ok" }, "\(replies)")
        for refused in replies.suffix(2) {
            #expect(refused?.string("code") == "limit" && (refused?.string("message") ?? "").contains("--max-group-members 3"), "\(String(describing: refused))")
        }
        let limitNotices = h.takeNotices().filter { if case .limitReached = $0 { return true } else { return false } }
        #expect(limitNotices.count == 2)
        let key = GroupKey(uid: 2000, pattern: try #require(Pattern("job.>")), serve: false, name: "w")
        #expect(h.broker.groups.group(key)?.count == 3)
        #expect(workers[3].groups.memberships.isEmpty && workers[3].account.groupMemberships == 3, "the refused join left nothing")
        // Another name, and another uid's group of the same name, count their own.
        h.send(workers[3], #"{"op":"subscribe","type":"job.>","group":"v","req":"v"}"#)
        #expect(h.read(workers[3]).last?.op == "ok")
        let other = h.connect(uid: 2001, gid: 2001)
        h.send(other, #"{"op":"subscribe","type":"job.>","group":"w","req":"o"}"#)
        #expect(h.read(other).last?.op == "ok")
        // A leave makes room.
        h.send(workers[0], #"{"op":"unsubscribe","type":"job.>","group":"w","req":"l"}"#)
        h.send(workers[4], #"{"op":"subscribe","type":"job.>","group":"w","req":"again"}"#)
        #expect(h.read(workers[4]).last?.int("members") == 3)
        // uid 0 is not bounded per group.
        let roots = (0..<5).map { _ in h.connect(uid: 0, gid: 0) }
        for root in roots { h.send(root, #"{"op":"subscribe","type":"job.>","group":"w","req":"r"}"#) }
        #expect(h.read(roots[4]).last?.int("members") == 5)
        h.closeAll()
    }
}
