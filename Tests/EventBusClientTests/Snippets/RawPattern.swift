// snippet.hide
// docs/CLIENT.md "The seeds": observing a pattern, raw.
import EventBus

enum RawPatternSnippet {
// snippet.show
@MainActor final class AuditLog {
    var lines: [String] = []
    init(bus: EventBus) throws {
        // `order.>`: every type under `order.`; an invalid pattern throws `.invalidName`.
        try bus.subscribe(self, matching: "order.>") { log, event in
            log.lines.append("\(event.metadata.type) from pid \(event.metadata.pid): \(String(decoding: event.data, as: UTF8.self))")
        }
    }
}
// snippet.hide
}
