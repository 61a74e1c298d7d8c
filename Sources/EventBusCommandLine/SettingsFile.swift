// The `key = value` settings files of the executables (/etc/eventbus/eventbusd.conf,
// /etc/eventbus/bridge.conf): the line format every one of them shares, split
// into settings lines here; what a key means is the program's (eventbusd reads
// its keys from its option table, EventBusBridge's ConfigFile has its own).
//
// The format: one `key = value` per line, blanks around both ignored; `#`
// starts a comment at the start of a line or after a blank (so a value may
// hold `#` inside a word, e.g. a password); blank lines are ignored; a CRLF
// file reads the same.
//
// Before editing: errors name the file and line as `FILE:LINE: message`, the
// form `--check-policy` and compilers use, so an editor can jump to it.

/// A bad line in a settings file. `description` reads `bridge.conf:3: ...`.
package struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    package let file: String
    package let line: Int
    package let message: String

    /// - Parameter line: 1-based, or 0 for the file as a whole (it cannot be read).
    package init(file: String, line: Int, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    /// `FILE:LINE: message`, or `FILE: message` for the file as a whole (line 0).
    package var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
}

/// One `key = value` line of a settings file.
package struct SettingsLine: Equatable, Sendable {
    /// 1-based line number.
    package let line: Int
    /// The key, lower-cased (`max-connections`).
    package let key: String
    /// The value, blanks around it removed; never empty.
    package let value: String
}

package enum SettingsFile {
    /// The settings lines of a file's `text`, in order; comments and blank lines skipped.
    /// - Parameter file: the name used in errors (e.g. `/etc/eventbus/eventbusd.conf`).
    /// - Throws: `ConfigError` for the first line that is not `key = value` or has no value.
    package static func lines(_ text: String, file: String) throws(ConfigError) -> [SettingsLine] {
        var result: [SettingsLine] = []
        var number = 0
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            number += 1
            let line = withoutComment(raw).trimmingBlanks()
            if line.isEmpty { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigError(file: file, line: number, message: "expected 'key = value', not \(String(line.prefix(80)).debugDescription)")
            }
            let key = line[..<equals].trimmingBlanks().lowercased()
            let value = line[line.index(after: equals)...].trimmingBlanks()
            guard !key.isEmpty else { throw ConfigError(file: file, line: number, message: "a line starts with '=': expected 'key = value'") }
            guard !value.isEmpty else { throw ConfigError(file: file, line: number, message: "\(key) has no value") }
            result.append(SettingsLine(line: number, key: key, value: value))
        }
        return result
    }

    /// The line up to a `#` that starts it or follows a blank.
    static func withoutComment(_ line: Substring) -> Substring {
        var previous: Character = " "
        for index in line.indices {
            let c = line[index]
            if c == "#" && (previous == " " || previous == "\t") { return line[..<index] }
            previous = c
        }
        return line
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs and CRs (a CRLF file reads the same).
    package func trimmingBlanks() -> String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" || c == "\r" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\r" { s = s.dropLast() }
        return String(s)
    }
}
