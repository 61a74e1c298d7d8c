// The one fence around uncounted references in the broker (issue 25): every
// reference the hot path holds or uses without a retain/release goes through
// `Uncounted`, so the rule below is stated once and a reader finds every
// place it is relied on with one grep (`Uncounted`).
//
// Before editing: the rule. An `Uncounted<T>` never keeps its object alive.
// Whoever makes one names, at that place, the counted reference that keeps
// the object alive for as long as any copy of the `Uncounted` is used (the
// ring's or the queue's own chunk array, the broker's `ledger.accounts` table, a
// parent node's `children`, the caller's local for the length of a call);
// when that owner lets go, every copy must be gone or never used again. Using
// one after its object is freed is a use-after-free that no check here
// catches (ASan does). `with` is the only `_`-prefixed standard library entry
// point in Sources/EventBusCore: it saves the retain/release pair a plain
// `takeUnretainedValue()` call may cost, on paths taken once per delivery.
// The members are `@_transparent`, as `Unmanaged`'s own are: with
// `@inline(__always)` instead the fan-out's closure stopped being inlined
// into `Broker.publish` and case 1 cost 2,725 Ir per delivery, not 2,290.

/// A reference to `T` that holds no count (`Unmanaged` without the
/// retain/release API): a plain word to copy, compare and test for nil.
/// The ownership rule is in this file's header.
struct Uncounted<T: AnyObject> {
    private let reference: Unmanaged<T>

    /// Refers to `object` without counting it; something else must keep it alive.
    @_transparent
    init(_ object: T) { reference = Unmanaged.passUnretained(object) }

    /// Calls `body` with the object, guaranteed alive by the owner (no
    /// retain/release around the call).
    @_transparent
    func with<R>(_ body: (T) throws -> R) rethrows -> R {
        try reference._withUnsafeGuaranteedRef(body)
    }

    /// The object as a counted reference: for a holder that keeps it
    /// (an entry of a queue or the ring), or a caller that needs it beyond `with`.
    @_transparent
    var object: T { reference.takeUnretainedValue() }
}
