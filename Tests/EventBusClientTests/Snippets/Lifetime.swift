// snippet.hide
// docs/CLIENT.md "Lifetime, cancellation": the bus in a task group, a
// cancelled wait.
import EventBus

enum LifetimeSnippet {
// snippet.show
struct OrderPlaced: BusEvent {
    static let eventType = "order.placed"
    var id: String
}

func serve(bus: EventBus) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await bus.run() }              // owns the bus: ends it when cancelled
        group.addTask {
            for try await order in bus.events(of: OrderPlaced.self) { print("order", order.event.id) }
        }
        _ = try await group.next()                         // the first to end ends the rest
        group.cancelAll()
    }
}

/// The current order, or nil when the broker does not answer within a second.
func currentOrder(bus: EventBus) async throws -> OrderPlaced? {
    try await withThrowingTaskGroup(of: OrderPlaced?.self) { group in
        group.addTask { try await bus.current(OrderPlaced.self)?.event }
        group.addTask { try await Task.sleep(for: .seconds(1)); return nil }
        defer { group.cancelAll() }                        // the other stops waiting at once
        return try await group.next() ?? nil
    }
}
// snippet.hide
}
