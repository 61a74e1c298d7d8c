// The decimal text of the seq the broker last wrote an event with, kept so
// that the next event's seq (one more, nearly always) costs a carry over
// the last digit instead of formatting (`FrameEncoder.EventBytes.seqText`).
//
// Before editing: any other seq (a retained publish's, one after the
// broker's own events, the first after a restore) is formatted in full;
// the text is valid until the next call. Raw memory (issue 35): the 20
// bytes are allocated here and freed with the value (noncopyable), and the
// text handed out points into them: the frame writer reads it at once.

/// Up to 20 decimal digits, right-aligned in storage the value owns.
struct SeqText: ~Copyable {
    private let storage: UnsafeMutableRawPointer
    /// The seq the text spells.
    private var value: UInt64 = 0
    /// Where the digits start; they end at byte 20.
    private var start = 19

    init() {
        storage = UnsafeMutableRawPointer.allocate(byteCount: 20, alignment: 8)
        storage.storeBytes(of: 0x30, toByteOffset: 19, as: UInt8.self)  // "0"
    }

    deinit { storage.deallocate() }

    /// The digits of `seq`, e.g. `1234` for 1234 (valid until the next call).
    @inline(__always)
    mutating func text(for seq: UInt64) -> UnsafeRawBufferPointer {
        if seq == value &+ 1 && value != UInt64.max {
            increment()
        } else if seq != value {
            set(seq)
        }
        value = seq
        return UnsafeRawBufferPointer(start: storage + start, count: 20 &- start)
    }

    /// Adds one to the digits (the caller checked they are below UInt64.max).
    @inline(__always)
    private mutating func increment() {
        var i = 19
        while true {
            let digit = storage.load(fromByteOffset: i, as: UInt8.self)
            if digit != 0x39 {
                storage.storeBytes(of: digit &+ 1, toByteOffset: i, as: UInt8.self)
                return
            }
            storage.storeBytes(of: 0x30, toByteOffset: i, as: UInt8.self)
            if i == start {
                start -= 1
                storage.storeBytes(of: 0x31, toByteOffset: start, as: UInt8.self)
                return
            }
            i -= 1
        }
    }

    private mutating func set(_ seq: UInt64) {
        var n = seq
        var i = 20
        repeat {
            i -= 1
            storage.storeBytes(of: 0x30 &+ UInt8(truncatingIfNeeded: n % 10), toByteOffset: i, as: UInt8.self)
            n /= 10
        } while n > 0
        start = i
    }
}
