// A subscription removed by a policy reload (POLICY.md "Reload": an `error`
// with `type` and no `req`, the connection staying open): `listen` and
// `wait` say so at once on standard error, and stop with 77 once none of
// their patterns is left, instead of waiting silently for events that can no
// longer come.
import EventBusProtocol

struct RevokedPatterns {
    private let patterns: Set<String>
    private var revoked: Set<String> = []

    init(_ patterns: [String]) { self.patterns = Set(patterns) }

    /// Records that the broker revoked `pattern`. Prints the notice and
    /// returns nil while other patterns are left; once none is, returns the
    /// error to stop with (77, forbidden) instead.
    mutating func revoke(_ pattern: String, _ reply: Reply) -> CLIError? {
        revoked.insert(pattern)
        let text = "the broker revoked the subscription to '\(pattern)' (its access policy was reloaded): \(reply.string("message") ?? "no message")"
        if revoked.isSuperset(of: patterns) { return CLIError(.noPermission, "\(text); no pattern is left") }
        printError(text)
        return nil
    }
}
