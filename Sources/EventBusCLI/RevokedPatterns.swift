// A subscription removed by a policy reload (POLICY.md "Reload": an `error`
// with `type` and no `req`, the connection staying open): `listen` and
// `wait` say so at once on standard error, and stop with 77 once none of
// their patterns is left, instead of waiting silently for events that can no
// longer come. Prints nothing itself: `SubscriberFeed` queues the notice.
@_spi(Package) import EventBusProtocol

struct RevokedPatterns {
    private let patterns: Set<String>
    private var revoked: Set<String> = []

    init(_ patterns: [String]) { self.patterns = Set(patterns) }

    /// Records that the broker revoked `pattern`.
    /// - Returns: `.failure` with the error to stop with (77, forbidden)
    ///   once no pattern is left; before that, `.success` with the notice
    ///   for standard error.
    mutating func revoke(_ pattern: String, _ reply: Reply) -> Result<String, CLIError> {
        revoked.insert(pattern)
        let text = "the broker revoked the subscription to '\(pattern)' (its access policy was reloaded): \(reply.string("message") ?? "no message")"
        if revoked.isSuperset(of: patterns) { return .failure(CLIError(.noPermission, "\(text); no pattern is left")) }
        return .success(text)
    }
}
