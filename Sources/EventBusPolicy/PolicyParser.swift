// The policy file format (PROTOCOL.md "Access policy (1.1)", "Quotas (1.1)";
// docs/POLICY.md): one line at a time into rules, `default` lines and `limit`
// lines, with user and group names resolved through the caller's resolver.
//
// Before editing: every error must name `file:line` and say what is wrong in
// words an administrator can act on; the error table in
// Tests/EventBusPolicyTests/ParserTests.swift pins the wording. The parser
// never stops at the first error, so `--check-policy` can list them all.
@_spi(Package) import EventBusProtocol

/// One policy file as the caller read it.
/// Example: `PolicySource(path: "/etc/eventbus/policy.conf", text: "deny publish system.>\n")`.
package struct PolicySource: Sendable {
    package var path: String
    package var text: String

    package init(path: String, text: String) {
        self.path = path
        self.text = text
    }
}

/// Resolves `user=` and `group=` names when a file is read. The broker
/// passes getpwnam(3)/getgrnam(3) wrappers; numbers never reach it.
package protocol PolicyNameResolver {
    /// The uid of user `name`, nil when there is no such user.
    func uid(ofUser name: String) -> UInt32?
    /// The gid of group `name`, nil when there is no such group.
    func gid(ofGroup name: String) -> UInt32?
}

/// A resolver from fixed tables (tests, and callers that accept numbers only).
package struct TableNameResolver: PolicyNameResolver, Sendable {
    package var users: [String: UInt32]
    package var groups: [String: UInt32]

    package init(users: [String: UInt32] = [:], groups: [String: UInt32] = [:]) {
        self.users = users
        self.groups = groups
    }

    package func uid(ofUser name: String) -> UInt32? { users[name] }
    package func gid(ofGroup name: String) -> UInt32? { groups[name] }
}

/// A line the parser could not accept. `description`:
/// `/etc/eventbus/policy.conf:7: unknown action "publsh" (expected connect, publish, subscribe, bridge, hold or serve)`.
package struct PolicyError: Error, Hashable, Sendable, CustomStringConvertible {
    package var path: String
    package var line: Int
    package var message: String

    package init(path: String, line: Int, message: String) {
        self.path = path
        self.line = line
        self.message = message
    }

    package var description: String { "\(path):\(line): \(message)" }
}

/// Why a set of files gave no policy: every error found, in file order.
package struct PolicyLoadError: Error, Sendable, CustomStringConvertible {
    /// In file order, at most one per line.
    package var errors: [PolicyError]

    /// One error per line.
    package var description: String { errors.map(\.description).joined(separator: "\n") }
}

/// What one file holds once parsed.
struct ParsedPolicyFile {
    var rules: [PolicyRule] = []
    var defaults: [PolicyDefault] = []
    var limits: [PolicyLimit] = []
    var errors: [PolicyError] = []
}

/// The widest decimal uid, used to check that every `%u` expansion stays a
/// valid pattern (at most 255 bytes).
let widestUID = "4294967295"

struct PolicyParser {
    let resolver: any PolicyNameResolver

    func parse(_ source: PolicySource) -> ParsedPolicyFile {
        var file = ParsedPolicyFile()
        var number = 0
        // "\r\n" is one Character in Swift: split on both, so CRLF files count lines right.
        for rawLine in source.text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            number += 1
            var line = rawLine
            if let hash = line.firstIndex(of: "#") { line = line[..<hash] }
            let tokens = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let keyword = tokens.first else { continue }
            let origin = PolicyOrigin.line(path: source.path, line: number)
            do throws(LineError) {
                switch keyword {
                case "allow", "deny":
                    file.rules.append(try rule(tokens, effect: keyword == "allow" ? .allow : .deny, origin: origin))
                case "default":
                    file.defaults.append(try defaultLine(tokens, origin: origin))
                case "limit":
                    file.limits.append(try limitLine(tokens, origin: origin))
                default:
                    throw LineError("unknown keyword \(quoted(keyword)) (expected allow, deny, default or limit)")
                }
            } catch {
                file.errors.append(PolicyError(path: source.path, line: number, message: error.message))
            }
        }
        return file
    }

    // MARK: Lines

    /// `allow|deny ACTION PATTERN|- [user=U] [group=G]`
    private func rule(_ tokens: [Substring], effect: PolicyEffect, origin: PolicyOrigin) throws(LineError) -> PolicyRule {
        guard tokens.count >= 2 else { throw LineError("\(effect) needs an action and a pattern: \(effect) connect|publish|subscribe|bridge|hold|serve PATTERN|- [user=U] [group=G]") }
        guard let action = PolicyAction(rawValue: String(tokens[1])) else {
            throw LineError("unknown action \(quoted(tokens[1])) (expected connect, publish, subscribe, bridge, hold or serve)")
        }
        guard tokens.count >= 3 else {
            throw LineError(action.takesPattern ? "\(effect) \(action) needs a pattern" : "\(effect) \(action) needs \"-\" as its pattern")
        }
        let patternToken = tokens[2]
        var pattern: String? = nil
        if action.takesPattern {
            guard patternToken != "-" else { throw LineError("\(action) rules take a pattern, not \"-\"") }
            pattern = try validatedPattern(patternToken)
        } else if patternToken != "-" {
            throw LineError("\(action) rules take \"-\" as their pattern, not \(quoted(patternToken))")
        }
        let who = try identity(tokens.dropFirst(3))
        return PolicyRule(effect: effect, action: action, pattern: pattern, uid: who.uid, gid: who.gid,
                          userName: who.userName, groupName: who.groupName, origin: origin)
    }

    /// `default publish|subscribe|connect|serve allow|deny`
    private func defaultLine(_ tokens: [Substring], origin: PolicyOrigin) throws(LineError) -> PolicyDefault {
        guard tokens.count >= 3 else { throw LineError("default needs an action and an effect: default publish|subscribe|connect|serve allow|deny") }
        guard let action = PolicyAction(rawValue: String(tokens[1])) else {
            throw LineError("unknown action \(quoted(tokens[1])) (expected publish, subscribe, connect or serve)")
        }
        guard action != .bridge else { throw LineError("bridge has no default: it is denied unless an allow bridge rule matches") }
        guard action != .hold else { throw LineError("hold has no default: without a hold rule a connection holds publishers of its own uid only") }
        let effect: PolicyEffect
        switch tokens[2] {
        case "allow": effect = .allow
        case "deny": effect = .deny
        default: throw LineError("unknown effect \(quoted(tokens[2])) (expected allow or deny)")
        }
        guard tokens.count == 3 else { throw LineError("unexpected \(quoted(tokens[3])) after default \(action) \(effect) (a default applies to everyone)") }
        return PolicyDefault(action: action, effect: effect, origin: origin)
    }

    /// `limit RESOURCE VALUE [user=U] [group=G]`
    private func limitLine(_ tokens: [Substring], origin: PolicyOrigin) throws(LineError) -> PolicyLimit {
        let names = LimitResource.allCases.map(\.rawValue).joined(separator: ", ")
        guard tokens.count >= 3 else { throw LineError("limit needs a resource and a value: limit RESOURCE VALUE [user=U] [group=G] (resources: \(names))") }
        guard let resource = LimitResource(rawValue: String(tokens[1])) else {
            throw LineError("unknown resource \(quoted(tokens[1])) (expected \(names))")
        }
        let value = try limitValue(tokens[2])
        let who = try identity(tokens.dropFirst(3))
        return PolicyLimit(resource: resource, value: value, uid: who.uid, gid: who.gid,
                           userName: who.userName, groupName: who.groupName, origin: origin)
    }

    // MARK: Fields

    /// A rule pattern: a valid pattern once every `%u` is a uid, whatever the uid.
    private func validatedPattern(_ token: Substring) throws(LineError) -> String {
        var rest = token[...]
        while let percent = rest.firstIndex(of: "%") {
            let next = rest.index(after: percent)
            guard next < rest.endIndex, rest[next] == "u" else {
                throw LineError("bad pattern \(quoted(token)): % must be followed by u (%u, the connection's uid)")
            }
            rest = rest[rest.index(after: next)...]
        }
        let text = String(token)
        let widest = text.replacing("%u", with: widestUID)
        if Pattern(widest) == nil {
            if let problem = patternProblem(widest) { throw LineError("bad pattern \(quoted(token)): \(problem)") }
            throw LineError("bad pattern \(quoted(token))")
        }
        return text
    }

    /// `user=U` and `group=G`, each at most once, in either order.
    private func identity(_ tokens: ArraySlice<Substring>) throws(LineError) -> (uid: UInt32?, gid: UInt32?, userName: String?, groupName: String?) {
        var uid: UInt32? = nil, gid: UInt32? = nil
        var userName: String? = nil, groupName: String? = nil
        for token in tokens {
            if token.hasPrefix("user=") {
                (uid, userName) = try qualifier("user", token.dropFirst(5), given: uid) { resolver.uid(ofUser: $0) }
            } else if token.hasPrefix("group=") {
                (gid, groupName) = try qualifier("group", token.dropFirst(6), given: gid) { resolver.gid(ofGroup: $0) }
            } else if let equals = token.firstIndex(of: "=") {
                throw LineError("unknown qualifier \(quoted(token[...equals])) (expected user= or group=)")
            } else {
                throw LineError("unexpected \(quoted(token)) (expected user=U or group=G)")
            }
        }
        return (uid, gid, userName, groupName)
    }

    /// The id `user=NAME` or `group=NAME` (`what`) names: a number, or a
    /// name `lookUp` knows (returned too, for the rule's label).
    /// - Parameter given: the id an earlier `what=` of the line gave.
    private func qualifier(_ what: String, _ name: Substring, given: UInt32?, lookUp: (String) -> UInt32?) throws(LineError) -> (UInt32, String?) {
        guard given == nil else { throw LineError("\(what)= given twice") }
        guard !name.isEmpty else { throw LineError("\(what)= needs a name or a number") }
        if let number = numericID(name) { return (number, nil) }
        guard let number = lookUp(String(name)) else { throw LineError("unknown \(what) \(quoted(name))") }
        return (number, String(name))
    }

    /// A decimal id below 2^32 - 1 (which is (uid_t)-1, no one's id).
    private func numericID(_ text: Substring) -> UInt32? {
        guard text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = UInt32(text), value != UInt32.max else { return nil }
        return value
    }

    /// `unlimited`, or a decimal number with an optional K, M or G suffix
    /// (binary: 1K = 1024).
    private func limitValue(_ token: Substring) throws(LineError) -> LimitValue {
        if token == "unlimited" { return .unlimited }
        var digits = token
        var shift = 0
        switch token.last {
        case "K", "k": shift = 10
        case "M", "m": shift = 20
        case "G", "g": shift = 30
        default: break
        }
        if shift > 0 { digits = token.dropLast() }
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw LineError("bad limit value \(quoted(token)) (expected a number with an optional K, M or G suffix, or unlimited)")
        }
        guard let number = Int(digits), number <= (Int(1) << 53) >> shift else {
            throw LineError("limit value \(quoted(token)) is too large (at most 2^53)")
        }
        return .value(number << shift)
    }

    /// Why `text` is not a valid pattern, in words.
    private func patternProblem(_ text: String) -> String? {
        if text.utf8.count > 255 {
            return text.contains(widestUID) ? "longer than 255 bytes once %u is a 10-digit uid" : "longer than 255 bytes"
        }
        let segments = text.split(separator: ".", omittingEmptySubsequences: false)
        for (i, segment) in segments.enumerated() {
            if segment.isEmpty { return "empty segment (two dots, or a dot at an end)" }
            if segment == "*" { continue }
            if segment == ">" {
                if i != segments.count - 1 { return "> may only be the last segment" }
                continue
            }
            if !segment.utf8.allSatisfy(EventType.isSegmentByte) {
                return "a segment is *, > or made of A-Z a-z 0-9 _ - : only"
            }
        }
        return nil
    }

    private func quoted<S: StringProtocol>(_ text: S) -> String { "\"\(text)\"" }
}

/// One line's problem, turned into a `PolicyError` with file and line by `parse`.
struct LineError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
