// The pass/fail corpus for the JSON scanner: RFC 8259 grammar, RFC 3629 UTF-8,
// the nesting limit (PROTOCOL.md "Framing": deeper than 512 is `bad_frame`),
// numbers of any magnitude, and the project's choices where RFC 8259 leaves
// room.
//
// Before editing: each case is judged by RFC 8259 plus these choices, written
// down here once:
// - a `\u` escape of a lone UTF-16 surrogate is rejected (RFC 8259 section 8.2
//   calls its behaviour "unpredictable"; we refuse to forward it);
// - a UTF-8 byte order mark is rejected (section 8.1 lets a parser ignore one;
//   frames are not files, and the BOM would be forwarded inside `data`);
// - nesting of 512 containers is accepted, 513 rejected.

import Testing

/// One corpus entry: a name, its bytes, and whether it is one valid JSON text.
struct CorpusCase: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    let valid: Bool

    var testDescription: String { name }

    static func pass(_ name: String, _ text: String) -> CorpusCase { CorpusCase(name: name, bytes: utf8(text), valid: true) }
    static func pass(_ name: String, bytes: [UInt8]) -> CorpusCase { CorpusCase(name: name, bytes: bytes, valid: true) }
    static func fail(_ name: String, _ text: String) -> CorpusCase { CorpusCase(name: name, bytes: utf8(text), valid: false) }
    static func fail(_ name: String, bytes: [UInt8]) -> CorpusCase { CorpusCase(name: name, bytes: bytes, valid: false) }
}

/// `"` + raw bytes + `"`: a string literal holding bytes that may not be UTF-8.
func quotedRaw(_ bytes: [UInt8]) -> [UInt8] { [0x22] + bytes + [0x22] }

enum JSONCorpus {
    static let pass: [CorpusCase] = [
        // Every kind of value, alone (RFC 8259 allows any value as a JSON text).
        .pass("empty object", "{}"),
        .pass("empty array", "[]"),
        .pass("empty string", "\"\""),
        .pass("true", "true"),
        .pass("false", "false"),
        .pass("null", "null"),
        .pass("zero", "0"),
        .pass("negative zero", "-0"),
        .pass("integer", "42"),
        .pass("negative integer", "-42"),
        .pass("fraction", "0.5"),
        .pass("negative fraction with exponent", "-0.0e-0"),
        .pass("exponent upper E", "1E5"),
        .pass("exponent plus", "1e+5"),
        .pass("exponent minus", "1e-5"),
        .pass("exponent leading zeros", "1e007"),
        .pass("huge exponent", "1e400"),
        .pass("tiny exponent", "-1e-400"),
        .pass("exponent beyond Int64", "1e99999999999999999999"),
        .pass("integer beyond UInt64", "123456789012345678901234567890123456789"),
        .pass("1000-digit integer", "9" + String(repeating: "0", count: 999)),
        .pass("long fraction", "0." + String(repeating: "1", count: 500)),
        .pass("2^53 + 1", "9007199254740993"),
        // Whitespace: exactly space, tab, LF, CR, before and after.
        .pass("whitespace around", " \t\r\n{} \t\r\n"),
        .pass("whitespace inside", "{ \"a\" : [ 1 , 2 ] , \"b\" :\t{ } }"),
        // Structure.
        .pass("nested", #"{"a":[1,2,{"b":null}],"c":"d","e":{"f":[[],{}]}}"#),
        .pass("empty key", #"{"":1}"#),
        .pass("duplicate keys are still JSON", #"{"a":1,"a":2}"#),
        .pass("array of every kind", #"[true,false,null,0,"",[],{}]"#),
        // Strings and escapes.
        .pass("all simple escapes", #""\" \\ \/ \b \f \n \r \t""#),
        .pass("unicode escape of NUL", #""\u0000""#),
        .pass("unicode escape lower hex", #""\u00e9""#),
        .pass("unicode escape upper hex", #""\u00E9""#),
        .pass("unicode escape U+FFFF", #""\uFFFF""#),
        .pass("surrogate pair escape", #""\uD83D\uDE00""#),
        .pass("highest surrogate pair escape", #""\uDBFF\uDFFF""#),
        .pass("escaped solidus and plain solidus", #""/\/""#),
        .pass("DEL is not a control character in JSON", bytes: quotedRaw([0x7F])),
        // UTF-8 at every boundary of RFC 3629's table.
        .pass("U+0080", bytes: quotedRaw([0xC2, 0x80])),
        .pass("U+07FF", bytes: quotedRaw([0xDF, 0xBF])),
        .pass("U+0800", bytes: quotedRaw([0xE0, 0xA0, 0x80])),
        .pass("U+D7FF (below surrogates)", bytes: quotedRaw([0xED, 0x9F, 0xBF])),
        .pass("U+E000 (above surrogates)", bytes: quotedRaw([0xEE, 0x80, 0x80])),
        .pass("U+FFFF noncharacter", bytes: quotedRaw([0xEF, 0xBF, 0xBF])),
        .pass("U+10000", bytes: quotedRaw([0xF0, 0x90, 0x80, 0x80])),
        .pass("U+10FFFF", bytes: quotedRaw([0xF4, 0x8F, 0xBF, 0xBF])),
        .pass("mixed text", "\"héllo wörld € 😀 日本\""),
        .pass("UTF-8 in a key", "{\"clé\":\"välue\"}"),
        // Nesting at the limit.
        .pass("512 nested arrays", bytes: nestedArrays(512)),
        .pass("512 nested objects", bytes: nestedObjects(512)),
        .pass("512 nested arrays around a value", bytes: nestedArrays(512, inner: "1")),
        // A realistic frame.
        .pass("publish frame", #"{"op":"publish","req":7,"type":"order.created","data":{"id":"3f9a","total":12.5,"items":[1,2]}}"#),
    ]

    static let fail: [CorpusCase] = [
        // Not a JSON text at all.
        .fail("empty input", ""),
        .fail("whitespace only", " \t\r\n"),
        .fail("form feed is not whitespace", "\u{0C}{}"),
        .fail("vertical tab is not whitespace", "\u{0B}{}"),
        .fail("no-break space is not whitespace", "\u{00A0}{}"),
        .fail("UTF-8 byte order mark", bytes: [0xEF, 0xBB, 0xBF] + utf8("{}")),
        .fail("UTF-16LE with BOM", bytes: [0xFF, 0xFE, 0x7B, 0x00, 0x7D, 0x00]),
        .fail("UTF-16BE without BOM", bytes: [0x00, 0x7B, 0x00, 0x7D]),
        .fail("trailing NUL", bytes: utf8("{}") + [0x00]),
        .fail("two values", "{}{}"),
        .fail("two values with space", "[] []"),
        .fail("trailing garbage", "{} x"),
        .fail("line comment", "{}//x"),
        .fail("block comment", "/**/{}"),
        // Structure.
        .fail("unclosed object", "{"),
        .fail("unclosed array", "["),
        .fail("stray close brace", "}"),
        .fail("mismatched brackets", "[}"),
        .fail("trailing comma in array", "[1,]"),
        .fail("trailing comma in object", #"{"a":1,}"#),
        .fail("leading comma in array", "[,1]"),
        .fail("lone comma in object", "{,}"),
        .fail("double comma", "[1,,2]"),
        .fail("missing comma", "[1 2]"),
        .fail("key without value", #"{"a"}"#),
        .fail("key with colon and no value", #"{"a":}"#),
        .fail("missing colon", #"{"a" 1}"#),
        .fail("unquoted key", "{a:1}"),
        .fail("single-quoted key", "{'a':1}"),
        .fail("number as key", "{1:1}"),
        .fail("object truncated after key", #"{"a""#),
        .fail("object truncated after value", #"{"a":1"#),
        // Literals.
        .fail("truncated true", "tru"),
        .fail("truncated null", "nul"),
        .fail("capitalised True", "True"),
        .fail("NaN", "NaN"),
        .fail("Infinity", "Infinity"),
        .fail("negative Infinity", "-Infinity"),
        .fail("undefined", "undefined"),
        // Numbers (RFC 8259 section 6).
        .fail("leading zero", "01"),
        .fail("negative leading zero", "-01"),
        .fail("plus sign", "+1"),
        .fail("lone minus", "-"),
        .fail("minus then space", "- 1"),
        .fail("dot without fraction digits", "1."),
        .fail("dot without integer digits", ".5"),
        .fail("exponent without digits", "1e"),
        .fail("exponent sign without digits", "1e+"),
        .fail("fraction dot then exponent", "1.e5"),
        .fail("hexadecimal", "0x10"),
        .fail("double minus", "--1"),
        .fail("two dots", "1.2.3"),
        // Strings.
        .fail("unterminated string", "\"abc"),
        .fail("unterminated after escape", "\"abc\\"),
        .fail("single-quoted string", "'a'"),
        .fail("unknown escape x", #""\x41""#),
        .fail("escaped single quote", #""\'""#),
        .fail("uppercase U escape", #""\U0041""#),
        .fail("short unicode escape", #""\u12""#),
        .fail("unicode escape cut by end", #""\u12"#),
        .fail("non-hex unicode escape", #""\u12G4""#),
        .fail("raw NUL in string", bytes: quotedRaw([0x00])),
        .fail("raw 0x01 in string", bytes: quotedRaw([0x01])),
        .fail("raw 0x1F in string", bytes: quotedRaw([0x1F])),
        .fail("raw tab in string", bytes: quotedRaw([0x09])),
        .fail("raw LF in string", bytes: quotedRaw([0x0A])),
        .fail("raw CR in string", bytes: quotedRaw([0x0D])),
        // Lone surrogates in \u escapes (our choice; see the file comment).
        .fail("lone high surrogate escape", #""\uD800""#),
        .fail("lone low surrogate escape", #""\uDC00""#),
        .fail("high surrogate then letter", #""\uD800x""#),
        .fail("high surrogate then BMP escape", #""\uD800\u0041""#),
        .fail("two high surrogates", #""\uDBFF\uDBFF""#),
        .fail("low then high surrogate", #""\uDC00\uD800""#),
        .fail("high surrogate then other escape", #""\uD800\n""#),
        .fail("high surrogate at end of input", #""\uD800"#),
        // Invalid UTF-8 (RFC 3629): overlong forms.
        .fail("overlong 2-byte slash C0 AF", bytes: quotedRaw([0xC0, 0xAF])),
        .fail("overlong 2-byte C1 BF", bytes: quotedRaw([0xC1, 0xBF])),
        .fail("overlong 3-byte E0 80 AF", bytes: quotedRaw([0xE0, 0x80, 0xAF])),
        .fail("overlong 3-byte E0 9F BF", bytes: quotedRaw([0xE0, 0x9F, 0xBF])),
        .fail("overlong 4-byte F0 80 80 AF", bytes: quotedRaw([0xF0, 0x80, 0x80, 0xAF])),
        .fail("overlong 4-byte F0 8F BF BF", bytes: quotedRaw([0xF0, 0x8F, 0xBF, 0xBF])),
        .fail("overlong NUL C0 80", bytes: quotedRaw([0xC0, 0x80])),
        // Surrogates encoded in UTF-8 (CESU-8 style).
        .fail("UTF-8 high surrogate ED A0 80", bytes: quotedRaw([0xED, 0xA0, 0x80])),
        .fail("UTF-8 low surrogate ED BF BF", bytes: quotedRaw([0xED, 0xBF, 0xBF])),
        .fail("UTF-8 surrogate pair as CESU-8", bytes: quotedRaw([0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80])),
        // Beyond U+10FFFF.
        .fail("U+110000 F4 90 80 80", bytes: quotedRaw([0xF4, 0x90, 0x80, 0x80])),
        .fail("lead byte F5", bytes: quotedRaw([0xF5, 0x80, 0x80, 0x80])),
        .fail("5-byte form F8", bytes: quotedRaw([0xF8, 0x88, 0x80, 0x80, 0x80])),
        .fail("6-byte form FC", bytes: quotedRaw([0xFC, 0x84, 0x80, 0x80, 0x80, 0x80])),
        .fail("byte FE", bytes: quotedRaw([0xFE])),
        .fail("byte FF", bytes: quotedRaw([0xFF])),
        // Truncated and stray bytes.
        .fail("lone continuation byte", bytes: quotedRaw([0x80])),
        .fail("continuation byte BF", bytes: quotedRaw([0xBF])),
        .fail("2-byte lead then ASCII", bytes: quotedRaw([0xC3, 0x41])),
        .fail("3-byte sequence cut before quote", bytes: quotedRaw([0xE2, 0x82])),
        .fail("4-byte sequence cut before quote", bytes: quotedRaw([0xF0, 0x9F, 0x98])),
        .fail("3-byte sequence cut by end of input", bytes: [0x22, 0xE2, 0x82]),
        .fail("lead byte at end of input", bytes: [0x22, 0xC3]),
        .fail("lead byte followed by another lead", bytes: quotedRaw([0xC3, 0xC3, 0xA9])),
        .fail("UTF-8 outside a string", bytes: utf8("[1,") + [0xC3, 0xA9] + utf8("]")),
        .fail("Latin-1 é in string", bytes: quotedRaw([0x63, 0x61, 0x66, 0xE9])),
        // Nesting over the limit.
        .fail("513 nested arrays", bytes: nestedArrays(513)),
        .fail("513 nested objects", bytes: nestedObjects(513)),
        .fail("100000 open brackets", bytes: [UInt8](repeating: 0x5B, count: 100_000)),
    ]

    static let all: [CorpusCase] = pass + fail
}
