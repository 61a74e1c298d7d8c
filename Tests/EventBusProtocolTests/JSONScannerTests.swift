// The JSON scanner against the pass/fail corpus, the reason and offset it
// gives, the tokens it reports, and the helpers built on it (`JSONObject`,
// `JSONString`).
@_spi(Package) @testable import EventBusProtocol
import Testing

@Suite("JSON scanner")
struct JSONScannerTests {
    @Test("accepts every valid text of the corpus", arguments: JSONCorpus.pass)
    func acceptsValidText(_ entry: CorpusCase) throws {
        let token = try validateJSON(entry.bytes).get()
        // The token spans the value, without the surrounding whitespace.
        let whitespace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        #expect(entry.bytes[..<token.start].allSatisfy(whitespace.contains))
        #expect(entry.bytes[token.end...].allSatisfy(whitespace.contains))
        #expect(!whitespace.contains(entry.bytes[token.start]))
    }

    @Test("rejects every invalid text of the corpus", arguments: JSONCorpus.fail)
    func rejectsInvalidText(_ entry: CorpusCase) {
        guard case .failure(let error) = validateJSON(entry.bytes) else {
            Issue.record("accepted \(entry.name)")
            return
        }
        #expect(error.offset >= 0 && error.offset <= entry.bytes.count)
    }

    @Test("names the reason a text is rejected", arguments: [
        ("{", JSONSyntaxError.Reason.unexpectedEnd),
        ("", .unexpectedEnd),
        ("x", .unexpectedByte),
        ("[1,]", .unexpectedByte),
        ("{} x", .trailingBytes),
        ("01", .trailingBytes),
        ("1.", .invalidNumber),
        ("-", .invalidNumber),
        ("1e+", .invalidNumber),
        (#""\x""#, .invalidEscape),
        (#""\u12G4""#, .invalidEscape),
        (#""\uD800""#, .loneSurrogate),
        (#""\uDC00""#, .loneSurrogate),
        ("\"a\u{01}\"", .controlCharacterInString),
    ])
    func namesTheReason(_ text: String, _ reason: JSONSyntaxError.Reason) {
        guard case .failure(let error) = validateJSON(utf8(text)) else {
            Issue.record("accepted \(text.debugDescription)")
            return
        }
        #expect(error.reason == reason)
    }

    @Test func invalidUTF8IsReportedAtItsLeadByte() {
        let bytes = quotedRaw(utf8("ab") + [0xC0, 0xAF])
        guard case .failure(let error) = validateJSON(bytes) else {
            Issue.record("accepted overlong form")
            return
        }
        #expect(error.reason == .invalidUTF8)
        #expect(error.offset == 3)
        #expect(error.description == "invalid UTF-8 at byte 3")
    }

    @Test func nestingOf512IsAcceptedAnd513IsTooDeep() {
        #expect(scannerAccepts(nestedArrays(512)))
        guard case .failure(let error) = validateJSON(nestedArrays(513)) else {
            Issue.record("accepted 513 levels")
            return
        }
        #expect(error.reason == .tooDeep)
        #expect(error.offset == 512)
    }

    @Test func mixedNestingCountsObjectsAndArraysTogether() {
        let open = String(repeating: "[{\"k\":", count: 256)
        let close = String(repeating: "}]", count: 256)
        #expect(scannerAccepts(utf8(open + "0" + close)))  // 512 containers
        #expect(!scannerAccepts(utf8(open + "[0]" + close)))  // 513
    }

    @Test func maxDepthIsConfigurable() {
        #expect(validateJSON(nestedArrays(3), maxDepth: 3).isSuccess)
        #expect(!validateJSON(nestedArrays(4), maxDepth: 3).isSuccess)
        #expect(validateJSON(utf8("1"), maxDepth: 0).isSuccess)
        #expect(!validateJSON(utf8("[]"), maxDepth: 0).isSuccess)
    }

    @Test("reports the kind of each value", arguments: [
        ("\"plain\"", JSONKind.string(escaped: false)),
        (#""tab\there""#, .string(escaped: true)),
        (#""\u0041""#, .string(escaped: true)),
        ("12", .number(integer: true)),
        ("-0", .number(integer: true)),
        ("1.0", .number(integer: false)),
        ("1e3", .number(integer: false)),
        ("{}", .object),
        ("[1]", .array),
        ("true", .true),
        ("false", .false),
        ("null", .null),
    ])
    func reportsTheKind(_ text: String, _ kind: JSONKind) throws {
        let token = try validateJSON(utf8(text)).get()
        #expect(token.kind == kind)
        #expect(token.start == 0 && token.end == text.utf8.count)
    }

    @Test func scanValueStopsRightAfterTheValue() throws {
        let bytes = utf8(#"{"a":[1,{"b":"c"}]} tail"#)
        try bytes.withByteView { raw in
            var scanner = JSONScanner(raw)
            let token = try scanner.scanValue(depth: 0)
            #expect(token == JSONToken(start: 0, end: 19, kind: .object))
            #expect(scanner.position == 19)
            let atEnd = scanner.atEndAfterWhitespace()
            #expect(!atEnd)
            #expect(scanner.position == 20)
        }
    }
}

@Suite("JSON object members and strings")
struct JSONObjectTests {
    @Test func membersListsTopLevelKeysInOrderWithDuplicates() throws {
        let bytes = utf8(#" { "a" : 1 , "b\u0021" : {"a":2} , "a" : [3] } "#)
        let members = try bytes.withByteView { raw throws(JSONObject.ReadError) in try JSONObject.members(raw) }
        #expect(members.map(\.key) == ["a", "b!", "a"])
        let values = members.map { String(decoding: bytes[$0.value.start..<$0.value.end], as: UTF8.self) }
        #expect(values == ["1", #"{"a":2}"#, "[3]"])
    }

    @Test("members refuses what is not one JSON object", arguments: [
        ("[1]", false), ("1", false), ("\"s\"", false), ("{", true), ("{\"a\":1} x", true), ("", true), ("{\"a\":01}", true),
    ])
    func membersRefusesNonObjects(_ text: String, _ isSyntaxError: Bool) {
        let bytes = utf8(text)
        let result = bytes.withByteView { raw in
            Result { () throws(JSONObject.ReadError) in try JSONObject.members(raw) }
        }
        switch result {
        case .success: Issue.record("accepted \(text.debugDescription)")
        case .failure(.notAnObject): #expect(!isSyntaxError)
        case .failure(.syntax): #expect(isSyntaxError)
        }
    }

    @Test func membersEnforcesTheNestingLimit() {
        let inner = String(repeating: "[", count: 511) + String(repeating: "]", count: 511)
        let ok = utf8("{\"a\":" + inner + "}")
        let deep = utf8("{\"a\":[" + inner + "]}")
        #expect(ok.withByteView { (try? JSONObject.members($0)) != nil })
        #expect(deep.withByteView { (try? JSONObject.members($0)) == nil })
        #expect(scannerAccepts(ok) && !scannerAccepts(deep))
    }

    @Test("decodes escapes to the same text Swift would", arguments: [
        (#""plain""#, "plain"),
        (#""\" \\ \/ \b \f \n \r \t""#, "\" \\ / \u{08} \u{0C} \n \r \t"),
        (#""\u00e9\u00E9""#, "éé"),
        (#""\uD83D\uDE00""#, "😀"),
        (#""\u0000""#, "\u{0}"),
        ("\"é€😀\"", "é€😀"),
        (#""\uDBFF\uDFFF""#, "\u{10FFFF}"),
        (#""\u0800\u07FF""#, "\u{0800}\u{07FF}"),
    ])
    func decodesEscapes(_ literal: String, _ expected: String) throws {
        let bytes = utf8(literal)
        let token = try validateJSON(bytes).get()
        bytes.withByteView { raw in
            #expect(JSONString.decode(raw, token) == expected)
            #expect(JSONString.decodeBytes(raw, token) == Array(expected.utf8))
        }
    }

    @Test("equals compares decoded text", arguments: [
        (#""op""#, true), (#""\u006fp""#, true), (#""\u006F\u0070""#, true), (#""o\p""#, false),
        (#""opp""#, false), (#""o""#, false), (#""OP""#, false), (#""""#, false),
    ])
    func equalsComparesDecodedText(_ literal: String, _ equal: Bool) {
        let bytes = utf8(literal)
        guard let token = try? validateJSON(bytes).get() else {
            #expect(!equal)  // "o\p" is not even valid JSON
            return
        }
        bytes.withByteView { raw in #expect(JSONString.equals(raw, token, "op") == equal) }
    }

    @Test("quoted output is valid JSON that decodes back", arguments: [
        "", "plain", "quote \" backslash \\ slash /", "controls \u{0}\u{1}\u{8}\u{9}\u{A}\u{C}\u{D}\u{1F}\u{7F}",
        "unicode é € 😀 \u{10FFFF}", "\u{2028}\u{2029}", "a\u{85}b – \u{2027}\u{202A}",
    ])
    func quotedRoundTrips(_ text: String) throws {
        let literal = JSONString.quoted(text)
        let bytes = utf8(literal)
        let token = try validateJSON(bytes).get()
        let separators = text.unicodeScalars.contains { $0 == "\u{85}" || $0 == "\u{2028}" || $0 == "\u{2029}" }
        #expect(token.kind == .string(escaped: separators || text.utf8.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }))
        #expect(!literal.unicodeScalars.contains { $0 == "\u{85}" || $0 == "\u{2028}" || $0 == "\u{2029}" }, "written as \\u escapes")
        bytes.withByteView { raw in #expect(JSONString.decode(raw, token) == text) }
    }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
