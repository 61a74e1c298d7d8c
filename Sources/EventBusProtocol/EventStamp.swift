// The parts of an event frame (PROTOCOL.md "Events") that are the same for
// every event of one publisher or of one broker run, written once as bytes
// so that `FrameEncoder.writeEvent` copies them: the default `source`
// (quoted), `,"pid":P,"uid":U,"gid":G`, and the opening of a default `id`,
// `"<instance>-`. The broker makes a connection's at `open` and remakes the
// source at `hello`.
//
// Before editing: the bytes live in a `StampBytes` (OwnedMemory.swift),
// which owns one allocation and frees it when it goes: a publish reads them
// through a `ByteView`, with no reference to count.

@_spi(Package) public enum EventStamp {
    /// The default `source` of a publisher's events, quoted: `"dashboard"`,
    /// `"pid/1234"` (PROTOCOL.md "Events": the client name, else `pid/<pid>`).
    @_spi(Package) public static func source(_ name: String) -> StampBytes {
        var out: [UInt8] = []
        JSONString.appendQuoted(name, to: &out)
        return StampBytes(out)
    }

    /// `,"pid":1234,"uid":1000,"gid":1000`: the publisher's credentials as
    /// an event carries them.
    @_spi(Package) public static func identity(pid: Int32, uid: UInt32, gid: UInt32) -> StampBytes {
        var out: [UInt8] = []
        FrameEncoder.appendASCII(",\"pid\":", to: &out)
        FrameEncoder.appendInt(Int64(pid), to: &out)
        FrameEncoder.appendField("uid", int: UInt64(uid), to: &out)
        FrameEncoder.appendField("gid", int: UInt64(gid), to: &out)
        return StampBytes(out)
    }

    /// `"0123456789abcdef-`: a default `id` is this, the event's seq and a quote.
    @_spi(Package) public static func idPrefix(instance: String) -> StampBytes {
        var out: [UInt8] = []
        JSONString.appendQuoted(instance, to: &out)
        out[out.count - 1] = 0x2D  // the closing quote comes after the seq
        return StampBytes(out)
    }
}
