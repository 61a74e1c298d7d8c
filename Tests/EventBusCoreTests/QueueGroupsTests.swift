// The queue group records' own rules (QueueGroups.swift): the ready bitmap
// agrees with a plain set on every query, a group's slots stay in join order
// through leaves and squeezes with the turn kept, and the group index finds
// exactly the groups whose pattern matches (checked against
// `Pattern.matches`) and is empty again once every group has gone.
@testable import EventBusCore
@_spi(Package) import EventBusProtocol
import Testing

@Suite("Queue group records")
struct QueueGroupsTests {
    @Test("ReadySet.first(atOrAfter:) agrees with a set through random inserts and removes")
    func readySetAgreesWithASet() {
        var rng = SeededGenerator(seed: 0x6A0B)
        for size in [1, 63, 64, 65, 4_096, 4_097, 70_000] {
            var ready = ReadySet()
            ready.grow(to: size)
            var model = Set<Int>()
            for _ in 0..<2_000 {
                let i = Int.random(in: 0..<size, using: &rng)
                if Bool.random(using: &rng) { ready.insert(i); model.insert(i) } else { ready.remove(i); model.remove(i) }
                let probe = Int.random(in: 0..<(size + 2), using: &rng)
                #expect(ready.first(atOrAfter: probe) == model.filter { $0 >= probe }.min(), "size \(size), probe \(probe)")
            }
            #expect(ready.isEmpty == model.isEmpty)
        }
    }

    @Test("A group keeps its members in join order through leaves and squeezes, and the turn stays with its member")
    func membersStayInJoinOrder() throws {
        let h = BrokerHarness()
        let connections = (0..<40).map { _ in h.connect() }
        let group = QueueGroup(key: GroupKey(uid: 0, pattern: try #require(Pattern("a.>")), serve: false, name: "w"))
        var members = connections.map { group.append($0, salt: $0.id) }
        var rng = SeededGenerator(seed: 0xC0FFEE)
        while members.count > 1 {
            let turn = members[Int.random(in: 0..<members.count, using: &rng)]
            group.passTurn(after: (turn.slot == 0 ? group.slotCount : turn.slot) - 1)  // the turn at `turn`
            #expect(group.cursor == turn.slot)
            let leaving = members.remove(at: Int.random(in: 0..<members.count, using: &rng))
            group.remove(leaving)
            #expect(group.members.map(\.connection.id) == members.map(\.connection.id), "join order kept")
            #expect(group.members.enumerated().allSatisfy { group.member(at: $0.element.slot) === $0.element })
            if turn !== leaving {
                #expect(group.nextReady(from: group.cursor).flatMap { group.member(at: $0) } === turn, "the turn stayed with its member")
            }
        }
    }

    @Test("The group index finds the groups whose pattern matches, and is empty once they are gone")
    func groupIndexMatchesLikePatterns() throws {
        let index = GroupIndex()
        let patterns = ["a", "a.b", "a.*", "a.>", "*.b", ">", "*.*.c", "a.b.>", "x.y"]
        var groups: [QueueGroup] = []
        for (i, text) in patterns.enumerated() {
            for name in ["g", "h"] {
                let group = QueueGroup(key: GroupKey(uid: UInt32(i), pattern: try #require(Pattern(text)), serve: false, name: name))
                index.add(group)
                groups.append(group)
            }
        }
        for typeName in ["a", "a.b", "a.b.c", "q.b", "z.z.c", "x.y", "b"] {
            let type = try #require(EventType(typeName))
            let found = Set(index.matches(type).map(ObjectIdentifier.init))
            let expected = Set(groups.filter { $0.key.pattern.matches(type) }.map(ObjectIdentifier.init))
            #expect(found == expected, "\(typeName)")
            #expect(index.matches(type).count == found.count, "each group once")
        }
        for group in groups.shuffled() { index.remove(group) }
        #expect(index.isEmpty && index.count == 0)
    }
}
