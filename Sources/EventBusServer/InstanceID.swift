// The broker's instance id (PROTOCOL.md "Requests", the `instance` of the
// `hello` and `stats` replies): new for every run, so clients can tell a
// restarted broker from the one they knew.
//
// Before editing: the id is random, not derived from the pid or the clock, so
// two runs in the same second (socket activation) still differ.

package enum InstanceID {
    /// 16 random lowercase hex digits (64 bits from the system CSPRNG), e.g. `"9f2c4e01d3b7a865"`.
    package static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt64
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
