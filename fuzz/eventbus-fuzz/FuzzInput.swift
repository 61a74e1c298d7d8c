// One fuzz input through every property, and the failure hook. Used by both
// entry points: libFuzzer's `LLVMFuzzerTestOneInput` and the replay driver.
//
// Before editing: keep each input's work bounded (libFuzzer runs this
// millions of times); the expensive checks only run on short inputs.
import Glibc

enum FuzzInput {
    /// Frames per input that get the request and differential properties.
    static let maxFramesChecked = 64
    /// The file being replayed, named in failure messages (replay driver only).
    nonisolated(unsafe) static var current: String? = nil

    static func run(_ bytes: UnsafeRawBufferPointer) {
        let input = Array(bytes)
        let seed = fnv1a(input)
        let frames = FramingProperties.check(input, seed: seed)
        for frame in frames.prefix(maxFramesChecked) {
            RequestProperties.check(frame)
            PublishPathProperties.check(frame)
            Differential.check(frame)
        }
        if frames.count != 1 || frames.first != input {
            Differential.check(input)
            input.withUnsafeBytes { PublishPathProperties.checkQuickScan($0) }
        }
        if input.count <= 1024 {
            NameProperties.check(input)
        }
        if input.count <= 8192 {
            RoutingProperties.check(input)
        }
    }

    /// FNV-1a over the input: seeds the chunk sizes so a saved input replays
    /// the same chunkings.
    static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        return hash
    }

    /// Up to 120 bytes, printable ASCII kept, the rest as \xHH.
    static func preview<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var text = ""
        for b in bytes.prefix(120) {
            if b >= 0x20 && b < 0x7F && b != 0x5C { text.unicodeScalars.append(Unicode.Scalar(b)) } else {
                let hex = String(b, radix: 16)
                text += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return bytes.count > 120 ? text + "... (\(bytes.count) bytes)" : text
    }
}

/// A property does not hold: print why and abort, so libFuzzer saves the
/// input as a crash file (and the replay driver exits non-zero).
func fuzzFailure(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    let input = FuzzInput.current.map { " on \($0)" } ?? ""
    let text = "eventbus-fuzz: property violated\(input) (\(file):\(line)): \(message)\n"
    _ = text.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    abort()
}
