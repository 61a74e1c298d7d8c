// Properties of `EventType` and `Pattern` (PROTOCOL.md "Names and patterns")
// against a reference model written from the protocol text alone: validity
// of names and patterns, and `Pattern.matches` on pairs cut from the input.
//
// Before editing: a violated property must trap (`fuzzFailure`).
@_spi(Package) import EventBusProtocol

enum NameProperties {
    static func isSegmentByte(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x5F || b == 0x2D || b == 0x3A
    }

    static func segments(_ s: [UInt8]) -> [[UInt8]] {
        s.split(separator: 0x2E, omittingEmptySubsequences: false).map(Array.init)
    }

    /// 1-255 bytes, `.`-separated non-empty segments of `A-Z a-z 0-9 _ - :`.
    static func referenceIsType(_ s: [UInt8]) -> Bool {
        guard (1...255).contains(s.count) else { return false }
        return segments(s).allSatisfy { !$0.isEmpty && $0.allSatisfy(isSegmentByte) }
    }

    /// A type where a whole segment may be `*` and the last may be `>`.
    static func referenceIsPattern(_ s: [UInt8]) -> Bool {
        guard (1...255).contains(s.count) else { return false }
        let parts = segments(s)
        for (i, part) in parts.enumerated() {
            if part == [0x2A] { continue }
            if part == [0x3E] && i == parts.count - 1 { continue }
            if part.isEmpty || !part.allSatisfy(isSegmentByte) { return false }
        }
        return true
    }

    /// `*` matches exactly one segment, a trailing `>` one or more.
    static func referenceMatches(_ pattern: ArraySlice<[UInt8]>, _ type: ArraySlice<[UInt8]>) -> Bool {
        guard let head = pattern.first else { return type.isEmpty }
        if head == [0x3E] && pattern.count == 1 { return !type.isEmpty }
        guard let first = type.first else { return false }
        guard head == [0x2A] || head == first else { return false }
        return referenceMatches(pattern.dropFirst(), type.dropFirst())
    }

    static func check(_ input: [UInt8]) {
        checkName(input)
        // Cut the input into a pattern and a type at its first space (or in
        // half) and check matching when both are valid.
        let cut = input.firstIndex(of: 0x20) ?? input.count / 2
        let left = Array(input[..<cut])
        let right = Array(input[min(cut + 1, input.count)...])
        checkName(left)
        checkName(right)
        let text = String(decoding: left, as: UTF8.self)
        let name = String(decoding: right, as: UTF8.self)
        if let pattern = Pattern(text), let type = EventType(name) {
            let expected = referenceMatches(segments(Array(text.utf8))[...], segments(Array(name.utf8))[...])
            if pattern.matches(type) != expected {
                fuzzFailure("Pattern(\(text)).matches(\(name)) is \(!expected), the model says \(expected)")
            }
        }
    }

    static func checkName(_ bytes: [UInt8]) {
        // Names come off the wire as decoded JSON strings, so any valid UTF-8;
        // invalid input bytes become U+FFFD here, which is never valid.
        let text = String(decoding: bytes, as: UTF8.self)
        let utf8 = Array(text.utf8)
        let type = EventType(text)
        if (type != nil) != referenceIsType(utf8) {
            fuzzFailure("EventType(\(FuzzInput.preview(utf8))) valid: \(type != nil), model: \(!(type != nil))")
        }
        if EventType.isValid(utf8) != (type != nil) { fuzzFailure("EventType.isValid disagrees with EventType.init") }
        let pattern = Pattern(text)
        if (pattern != nil) != referenceIsPattern(utf8) {
            fuzzFailure("Pattern(\(FuzzInput.preview(utf8))) valid: \(pattern != nil), model: \(!(pattern != nil))")
        }
        if let pattern {
            let wild = segments(utf8).contains { $0 == [0x2A] || $0 == [0x3E] }
            if pattern.hasWildcards != wild { fuzzFailure("Pattern(\(text)).hasWildcards is \(pattern.hasWildcards)") }
            if !wild, let type, !pattern.matches(type) { fuzzFailure("\(text) does not match itself") }
        }
        if type != nil && pattern == nil { fuzzFailure("type \(text) is not a valid pattern") }
    }
}
