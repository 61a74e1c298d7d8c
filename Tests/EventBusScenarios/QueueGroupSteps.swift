// The steps of the queue-group tests (PROTOCOL.md "Queue groups (1.3)"):
// joining a group, publishing numbered events, reading the numbers back.
// Shared by QueueGroupScenarios.swift and EventBusIntegrationTests'
// QueueGroupTests/QueueGroupFlowTests.
//
// Before editing: each step throws on a reply other than `ok`.
import EventBusTestSupport

package enum QueueGroupSteps {
    /// Joins `group` on `pattern` and returns the `ok`.
    @discardableResult
    package static func join(_ client: RawClient, _ pattern: String, group: String, req: String = "join") throws -> Frame {
        try client.ok(#"{"op":"subscribe","type":"\#(pattern)","group":"\#(group)","req":"\#(req)"}"#)
    }

    /// The `data.i` of each event among `frames`.
    package static func indices(_ frames: [Frame]) -> [Int] {
        frames.filter { $0.op == "event" }.compactMap { $0.object("data")?["i"] as? Int }
    }

    /// Publishes events `i` = `range` of `type` with `req`, each answered.
    @discardableResult
    package static func publish(_ client: RawClient, _ type: String, _ range: Range<Int>, key: (Int) -> String? = { _ in nil }) throws -> [Frame] {
        try range.map { i in
            let keyField = key(i).map { #","key":"\#($0)""# } ?? ""
            return try client.ok(#"{"op":"publish","type":"\#(type)","req":\#(i),"data":{"i":\#(i)}\#(keyField)}"#)
        }
    }
}
