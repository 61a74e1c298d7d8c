// The memory EventBusProtocol owns or writes (issue 35), each with its
// invariant; ByteView.swift is the read-only view of bytes, and these two
// files are the only ones in the target that hold a pointer:
// - `RawWriter` writes a frame into memory its caller owns and sized with an
//   upper bound (Core's EventWriter: the history ring's arena end, its
//   scratch, a chunk; `Array.appendWritten` here; issue 36: the NATS
//   outbox, where the bridge's export writes its message in place): every
//   variable-length put is checked against the capacity in every build,
//   fixed text by the slack.
// - `StampBytes` owns one allocation of bytes made once and read many times
//   (EventStamp.swift): freed with the value, which cannot be copied, so no
//   view of it outlives it while the owner (a connection, the writer) holds it.
// - `TokenSlots` are fixed slots of trivial values: on the stack for one call
//   (`withTemporary`), allocated and freed by their owner (`RequestScan`),
//   or made once and never freed (`immortal`: the key tables, static).
//
// Before editing: a slot index and a writer's offsets are checked where the
// callers cannot prove them (the writer's `room`), and by `assert` where the
// caller's own bound covers them (a set's slot is below its capacity).

/// Writes bytes to raw memory the caller sized with an upper bound.
@_spi(Package) public struct RawWriter {
    @usableFromInline var pointer: UnsafeMutableRawPointer
    @usableFromInline let start: UnsafeMutableRawPointer
    /// One past the last byte it may write.
    @usableFromInline let end: UnsafeMutableRawPointer
    /// `end - slack`: where a checked put may end at most.
    @usableFromInline let limit: UnsafeMutableRawPointer

    /// Fixed text a writer may put between two checked puts: every
    /// variable-length put (`put(_:)` of a buffer, `put(int:)`) checks that
    /// its bytes *plus* `slack` fit, and `init` that `slack` does, so the
    /// fixed text after a check (literals, the 24-byte time; in `writeEvent`
    /// at most 49 bytes in a row) cannot pass the end either. Fixed puts are
    /// checked by `assert` (debug builds: every test run). The size bounds
    /// (`eventByteCountUpperBound`) include it.
    @_spi(Package) public static let slack = 64

    /// A writer of at most `capacity` bytes from `pointer`: checked at the
    /// write (a `precondition`, kept in release builds), so a bound computed
    /// too small stops the process instead of overrunning the buffer.
    @inlinable @_spi(Package) public init(_ pointer: UnsafeMutableRawPointer, capacity: Int) {
        precondition(capacity >= RawWriter.slack, "event frame writer given less than its slack")
        self.pointer = pointer
        self.start = pointer
        self.end = pointer + capacity
        self.limit = end - RawWriter.slack
    }

    @inlinable @_spi(Package) public var count: Int { pointer - start }

    /// Stops the process unless `n` more bytes and `slack` fit.
    @inlinable @inline(__always) func room(_ n: Int) {
        precondition(pointer + n <= limit, "event frame writer past the end of its buffer")
    }

    /// In debug builds, stops unless `n` more bytes fit (a fixed put,
    /// covered in release builds by the last `room` and its `slack`).
    @inlinable @inline(__always) func fixedRoom(_ n: Int) {
        assert(n <= end - pointer, "event frame writer past the end of its buffer")
    }

    @inlinable @inline(__always) @_spi(Package) public mutating func put(_ byte: UInt8) {
        fixedRoom(1)
        pointer.storeBytes(of: byte, as: UInt8.self)
        pointer += 1
    }

    /// Copies `bytes`: up to 16 of them by two overlapping loads and
    /// stores (the spliced tokens and stamps are mostly that short), up to
    /// 32 by four (the frame's opening, most types), more by `memcpy`.
    @inlinable @inline(__always) @_spi(Package) public mutating func put(_ bytes: ByteView) {
        let n = bytes.count
        room(n)
        putUnchecked(bytes.start, n)
    }

    /// Steps over `n` bytes something else wrote through a copy of this writer.
    @inlinable mutating func skip(_ n: Int) {
        room(n)
        pointer += n
    }

    /// What was written from `offset` (of `count`) on: valid while the
    /// memory written to is, and until it is written again.
    @inlinable @inline(__always) func written(from offset: Int) -> ByteView {
        ByteView(start: UnsafeRawPointer(start + offset), count: count &- offset)
    }

    /// Fixed text (a literal): `fixedRoom`, then as `put(_:)` of a buffer.
    @inlinable @inline(__always) @_spi(Package) public mutating func put(_ text: StaticString) {
        let n = text.utf8CodeUnitCount
        fixedRoom(n)
        putUnchecked(UnsafeRawPointer(text.utf8Start), n)
    }

    /// The copy of `put(_:)`, for a caller that checked the room.
    @inlinable @inline(__always) mutating func putUnchecked(_ base: UnsafeRawPointer, _ n: Int) {
        if n > 16 && n <= 32 {
            let w0 = base.loadUnaligned(as: UInt64.self), w1 = base.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            let w2 = base.loadUnaligned(fromByteOffset: n &- 16, as: UInt64.self), w3 = base.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
            pointer.storeBytes(of: w0, as: UInt64.self)
            pointer.storeBytes(of: w1, toByteOffset: 8, as: UInt64.self)
            pointer.storeBytes(of: w2, toByteOffset: n &- 16, as: UInt64.self)
            pointer.storeBytes(of: w3, toByteOffset: n &- 8, as: UInt64.self)
        } else if n >= 8 && n <= 16 {
            let head = base.loadUnaligned(as: UInt64.self), tail = base.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
            pointer.storeBytes(of: head, as: UInt64.self)
            pointer.storeBytes(of: tail, toByteOffset: n &- 8, as: UInt64.self)
        } else if n >= 4 && n < 8 {
            let head = base.loadUnaligned(as: UInt32.self), tail = base.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)
            pointer.storeBytes(of: head, as: UInt32.self)
            pointer.storeBytes(of: tail, toByteOffset: n &- 4, as: UInt32.self)
        } else {
            pointer.copyMemory(from: base, byteCount: n)
        }
        pointer += n
    }

    /// The 24 bytes of a timestamp, as three word stores.
    @inlinable @inline(__always) @_spi(Package) public mutating func put(_ time: TimestampBytes) {
        fixedRoom(24)
        pointer.storeBytes(of: time.words.0, as: UInt64.self)
        (pointer + 8).storeBytes(of: time.words.1, as: UInt64.self)
        (pointer + 16).storeBytes(of: time.words.2, as: UInt64.self)
        pointer += 24
    }

    /// Writes `value` in decimal, two digits at a time from a table.
    @inlinable @_spi(Package) public mutating func put(int value: UInt64) {
        var digits = 1
        var limit: UInt64 = 10
        while digits < 20 && value >= limit {
            digits &+= 1
            limit = limit &* 10
        }
        room(digits)
        let pairs = RawWriter.digitPairs.utf8Start
        var n = value
        var i = digits
        while n >= 100 {
            let q = n / 100
            let r = Int(truncatingIfNeeded: n &- q &* 100)
            i &-= 2
            (pointer + i).storeBytes(of: UnsafeRawPointer(pairs).loadUnaligned(fromByteOffset: r &* 2, as: UInt16.self), as: UInt16.self)
            n = q
        }
        if n >= 10 {
            (pointer + (i &- 2)).storeBytes(of: UnsafeRawPointer(pairs).loadUnaligned(fromByteOffset: Int(truncatingIfNeeded: n) &* 2, as: UInt16.self), as: UInt16.self)
        } else {
            (pointer + (i &- 1)).storeBytes(of: 0x30 &+ UInt8(truncatingIfNeeded: n), as: UInt8.self)
        }
        pointer += digits
    }

    /// "00", "01", ... "99".
    @usableFromInline static let digitPairs: StaticString =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
}


extension Array where Element == UInt8 {
    /// Appends what `write` writes into `bound` bytes of room (an upper
    /// bound; at least `RawWriter.slack`): the writer stops the process
    /// rather than write past them.
    /// (issue 36: into the array's free capacity, no longer zero-filled first
    /// and cut back after: 300 of the bridge's 4.5k instructions an export.)
    @inlinable
    @_spi(Package) public mutating func appendWritten(bound: Int, _ write: (inout RawWriter) -> Void) {
        append(addingCapacity: bound) { out in
            out.withUnsafeMutableBufferPointer { free, initialized in
                var w = RawWriter(UnsafeMutableRawPointer(free.baseAddress!), capacity: bound)
                write(&w)
                initialized = w.count
            }
        }
    }
}

/// Bytes made once and read many times through a view (no reference
/// counting); freed with the value, which cannot be copied.
@_spi(Package) public struct StampBytes: ~Copyable {
    /// The bytes; valid for as long as this value.
    @_spi(Package) public let bytes: ByteView

    @_spi(Package) public init(_ source: [UInt8]) {
        let storage = UnsafeMutableRawPointer.allocate(byteCount: max(source.count, 1), alignment: 8)
        source.withUnsafeBytes { storage.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        bytes = ByteView(unsafeStart: UnsafeRawPointer(storage), count: source.count)
    }

    deinit { UnsafeMutableRawPointer(mutating: bytes.start).deallocate() }

    /// How many bytes.
    @_spi(Package) public var byteCount: Int { bytes.count }

    /// A copy of the bytes.
    @_spi(Package) public var array: [UInt8] { bytes.array }

    /// Calls `body` with the bytes as a span.
    @_spi(Package) public func withSpan<R>(_ body: (RawSpan) -> R) -> R { bytes.withSpan(body) }
}

/// `capacity` slots of trivial values at a fixed place (see the header for
/// who owns them). Copying one copies the place, not the values.
struct TokenSlots<Value> {
    private let base: UnsafeMutablePointer<Value>
    #if DEBUG
    private let capacity: Int
    #endif

    private init(_ base: UnsafeMutablePointer<Value>, capacity: Int) {
        assert(_isPOD(Value.self), "slots hold trivial values only (written over uninitialised memory)")
        self.base = base
        #if DEBUG
        self.capacity = capacity
        #endif
    }

    /// Calls `body` with slots on the stack, for the call only.
    @inline(__always)
    static func withTemporary<R, E: Error>(capacity: Int, _ body: (TokenSlots) throws(E) -> R) throws(E) -> R {
        try withUnsafeTemporaryAllocation(of: Value.self, capacity: capacity) { (buffer) throws(E) -> R in
            try body(TokenSlots(buffer.baseAddress!, capacity: capacity))
        }
    }

    /// Slots its owner frees with `deallocate` (uninitialised: a slot is read only after it is written).
    static func allocate(capacity: Int) -> TokenSlots {
        TokenSlots(.allocate(capacity: capacity), capacity: capacity)
    }

    /// Frees slots made by `allocate`; no copy of them is used afterwards.
    func deallocate() { base.deallocate() }

    /// Slots holding `values`, never freed (tables that live as long as the process).
    static func immortal(copying values: [Value]) -> TokenSlots {
        let base = UnsafeMutablePointer<Value>.allocate(capacity: values.count)
        base.initialize(from: values, count: values.count)
        return TokenSlots(base, capacity: values.count)
    }

    /// The value in slot `i` (checked in debug builds; callers keep `i` below their capacity).
    @inline(__always)
    subscript(i: Int) -> Value {
        get {
            #if DEBUG
            assert(i >= 0 && i < capacity, "slot out of bounds")
            #endif
            return base[i]
        }
        nonmutating set {
            #if DEBUG
            assert(i >= 0 && i < capacity, "slot out of bounds")
            #endif
            base[i] = newValue
        }
    }
}
