// NATS subjects as this client writes them on a control line (nats-io/nats.docs
// reference/nats-protocol "Protocol conventions"): tokens separated by `.`,
// `*` a whole-token wildcard, `>` a final whole-token wildcard.
//
// Before editing: a `Subject` can only be made through its failable
// initialisers, and what they accept can never break a control line (no space,
// tab, CR, LF or other control byte, no empty token). Everything the encoder
// writes after `PUB`/`HPUB`/`SUB` is a `Subject`, which is what makes the
// encoder injection-proof.

/// A validated NATS subject: 1 to `maxBytes` bytes, tokens separated by `.`,
/// no empty token, no byte ≤ 0x20 and no DEL. Example: `eventbus.evt.host-a.order.created`.
package struct Subject: Hashable, Sendable, CustomStringConvertible {
    /// The subject as written on the wire.
    package let text: String
    /// Whether it contains a `*` or `>` token (allowed in SUB only).
    package let hasWildcards: Bool

    /// Longest subject accepted (bytes). nats-server's control line limit is
    /// 4096 bytes (`MAX_CONTROL_LINE_SIZE`, const.go); this leaves room for the rest of the line.
    package static let maxBytes = 2048

    /// A subject for SUB: wildcards allowed (`*` as a whole token, `>` as the last token).
    /// Nil when a rule above is broken.
    package init?(pattern text: String) {
        guard let wild = Subject.check(text, wildcards: true) else { return nil }
        self.text = text
        self.hasWildcards = wild
    }

    /// A literal subject for PUB/HPUB: no `*` or `>` token. Nil when a rule is broken.
    package init?(_ text: String) {
        guard let wild = Subject.check(text, wildcards: false), !wild else { return nil }
        self.text = text
        self.hasWildcards = false
    }

    /// Any text, unchecked: only for tests that must send what a server refuses.
    init(unchecked text: String) {
        self.text = text
        self.hasWildcards = false
    }

    /// Whether `text` is well formed; the result tells whether it has wildcard tokens.
    /// Nil when malformed (or when `wildcards` is false and it has one).
    static func check(_ text: String, wildcards: Bool) -> Bool? {
        text.withUTF8Bytes { check(Span<UInt8>(_bytes: $0), wildcards: wildcards) }
    }

    /// `check` over the subject's bytes (a loop over a span: every export's subject is checked).
    private static func check(_ utf8: Span<UInt8>, wildcards: Bool) -> Bool? {
        guard !utf8.isEmpty, utf8.count <= maxBytes else { return nil }
        var tokenLength = 0
        var tokenIsWildcard = false
        var sawFullWildcard = false
        var wild = false
        for i in utf8.indices {
            let b = utf8[i]
            if b == 0x2E {  // "."
                if tokenLength == 0 || sawFullWildcard { return nil }
                tokenLength = 0
                tokenIsWildcard = false
                continue
            }
            if b <= 0x20 || b == 0x7F { return nil }
            if sawFullWildcard { return nil }
            if b == 0x2A || b == 0x3E {  // "*" ">"
                guard tokenLength == 0 else { return nil }
                tokenIsWildcard = true
                wild = true
                if b == 0x3E { sawFullWildcard = true }
            } else if tokenIsWildcard {
                return nil
            }
            tokenLength += 1
        }
        guard tokenLength > 0 else { return nil }
        if wild && !wildcards { return nil }
        return wild
    }

    package var description: String { text }
}

/// A subscription id (`sid`), chosen by the client: the decimal digits of a
/// counter that starts at 1 on each `ClientState`. Sids stay the same across
/// reconnects (subscriptions are re-sent with the same sid).
package struct SubscriptionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    package let rawValue: UInt64

    package init(_ rawValue: UInt64) { self.rawValue = rawValue }

    package static func < (a: SubscriptionID, b: SubscriptionID) -> Bool { a.rawValue < b.rawValue }

    package var description: String { String(rawValue) }
}
