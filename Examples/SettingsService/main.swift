// Example: a settings service that publishes `currency.changed` when the
// user's currency changes. Run `dashboard` in another terminal first.
//
//     settings-service [--socket PATH] EUR GBP ...
//
// Each code is published once, in order, and retained: the broker keeps the
// last one as the current value, which a dashboard started later shows at
// once (`initial: .last`). The program prints the broker's receipt and
// exits 0 (1 with a message on stderr if the bus is unavailable).
import EventBus
import Foundation

/// The event both programs agree on: its type name and its JSON shape.
struct CurrencyChanged: BusEvent {
    static let eventType = "currency.changed"
    var code: String
}

var arguments = Array(CommandLine.arguments.dropFirst())
var configuration = EventBus.Configuration(clientName: "settings-service")
if arguments.contains("--help") || arguments.contains("-h") {
    print("usage: settings-service [--socket PATH] CODE...")
    exit(0)
}
if arguments.first == "--socket", arguments.count >= 2 {
    configuration.bus = .path(arguments[1])
    arguments.removeFirst(2)
}
guard !arguments.isEmpty else {
    FileHandle.standardError.write(Data("usage: settings-service [--socket PATH] CODE...\n".utf8))
    exit(64)
}

do {
    let bus = try await EventBus.connect(configuration)
    for code in arguments {
        let receipt = try await bus.publish(CurrencyChanged(code: code), retain: true)
        print("settings-service: currency is now \(code) (seq \(receipt.seq), delivered to \(receipt.delivered))")
    }
    bus.close()
} catch {
    FileHandle.standardError.write(Data("settings-service: \(error)\n".utf8))
    exit(1)
}
