// Process environment and identity helpers for the executables.
import EventBusProtocol
import Glibc

public enum Environment {
    /// The process environment as a dictionary (environ(7)).
    public static func variables() -> [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let eq = text.firstIndex(of: "=") {
                result[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            pointer += 1
        }
        return result
    }
}

public enum InstanceID {
    /// 16 random lowercase hex digits (64 bits from the system CSPRNG).
    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt64
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
