// Suggestion.closest: the "did you mean" of a mistyped command or option.
import EventBusCommandLine
import Testing

@Suite("Did you mean")
struct SuggestionTests {
    static let commands = ["publish", "listen", "wait", "get", "clear", "stats", "clients", "types", "top", "request", "serve", "ping", "reload", "help"]

    @Test(arguments: [
        ("publsh", "publish"),    // a letter left out
        ("lsiten", "listen"),     // two neighbours swapped: one edit
        ("pign", "ping"),
        ("requets", "request"),
        ("clinets", "clients"),
        ("stat", "stats"),
        ("tops", "top"),          // one edit from top, two from types
    ])
    func aCloseTypoGetsTheCommand(typed: String, expected: String) {
        #expect(Suggestion.closest(to: typed, among: Self.commands) == expected)
    }

    @Test(arguments: ["subscribe", "frobnicate", "x", "pu", "gte.", "publish"])
    func nothingCloseEnoughGetsNothing(typed: String) {
        #expect(Suggestion.closest(to: typed, among: Self.commands) == nil, "\(typed)")
    }

    @Test func twoEquallyCloseGetNothing() {
        #expect(Suggestion.closest(to: "cat", among: ["bat", "car"]) == nil)
        #expect(Suggestion.closest(to: "cat", among: ["bat", "carts"]) == "bat")
    }
}
