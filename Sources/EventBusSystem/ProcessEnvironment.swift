// The calling process's environment (getenv(3), environ(7)): the one place the
// executables, the client library and the systemd glue read it.
//
// Before editing: keep this file free of state; the environment is read afresh
// on every call, so a setenv(3) made earlier is seen.
import Glibc

/// The calling process's environment variables.
@usableFromInline package enum ProcessEnvironment {
    /// getenv(3): the value of `name`, nil when unset (an empty value is "").
    package static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// The whole environment (environ(7)) as a dictionary, e.g.
    /// `["XDG_RUNTIME_DIR": "/run/user/1000", ...]`; for a name given twice
    /// the first entry wins, as with getenv(3).
    @usableFromInline package static func variables() -> [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let eq = text.firstIndex(of: "=") {
                let name = String(text[..<eq])
                if result[name] == nil { result[name] = String(text[text.index(after: eq)...]) }
            }
            pointer += 1
        }
        return result
    }
}
