// A second, deliberately plain JSON validator used as the judge in the
// differential tests: RFC 8259's ABNF transcribed rule by rule over Unicode
// scalars, with UTF-8 checked by the Swift standard library rather than by
// hand. Slow and simple on purpose; it shares no code with `JSONScanner`.
//
// Before editing: it applies the same three project choices as the corpus
// (see JSONCorpus.swift): lone-surrogate escapes and a BOM are rejected, and
// nesting deeper than `maxDepth` is rejected.

enum ReferenceJSONValidator {
    /// Whether `bytes` is one JSON text by RFC 8259 (+ the project choices).
    static func isValid(_ bytes: [UInt8], maxDepth: Int = 512) -> Bool {
        // RFC 8259 section 8.1: UTF-8. The stdlib rejects overlongs,
        // surrogates, and anything above U+10FFFF.
        guard let text = String(validating: bytes, as: UTF8.self) else { return false }
        var parser = Parser(scalars: Array(text.unicodeScalars).map(\.value), maxDepth: maxDepth)
        return parser.jsonText()
    }

    struct Parser {
        let scalars: [UInt32]
        let maxDepth: Int
        var i = 0

        init(scalars: [UInt32], maxDepth: Int) {
            self.scalars = scalars
            self.maxDepth = maxDepth
        }

        var peek: UInt32? { i < scalars.count ? scalars[i] : nil }

        mutating func eat(_ c: Character) -> Bool {
            if peek == c.unicodeScalars.first!.value { i += 1; return true }
            return false
        }

        // JSON-text = ws value ws
        mutating func jsonText() -> Bool {
            ws()
            guard value(depth: 0) else { return false }
            ws()
            return i == scalars.count
        }

        // ws = *( %x20 / %x09 / %x0A / %x0D )
        mutating func ws() {
            while let c = peek, c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { i += 1 }
        }

        // value = false / null / true / object / array / number / string
        mutating func value(depth: Int) -> Bool {
            guard let c = peek else { return false }
            switch c {
            case 0x7B: return object(depth: depth + 1)
            case 0x5B: return array(depth: depth + 1)
            case 0x22: return string()
            case 0x74: return literal("true")
            case 0x66: return literal("false")
            case 0x6E: return literal("null")
            default: return number()
            }
        }

        mutating func literal(_ word: String) -> Bool {
            for c in word.unicodeScalars {
                guard peek == c.value else { return false }
                i += 1
            }
            return true
        }

        // object = begin-object [ member *( value-separator member ) ] end-object
        // member = string name-separator value
        mutating func object(depth: Int) -> Bool {
            guard depth <= maxDepth else { return false }
            i += 1
            ws()
            if eat("}") { return true }
            while true {
                ws()
                guard string() else { return false }
                ws()
                guard eat(":") else { return false }
                ws()
                guard value(depth: depth) else { return false }
                ws()
                if eat(",") { continue }
                return eat("}")
            }
        }

        // array = begin-array [ value *( value-separator value ) ] end-array
        mutating func array(depth: Int) -> Bool {
            guard depth <= maxDepth else { return false }
            i += 1
            ws()
            if eat("]") { return true }
            while true {
                ws()
                guard value(depth: depth) else { return false }
                ws()
                if eat(",") { continue }
                return eat("]")
            }
        }

        static func isDigit(_ c: UInt32?) -> Bool { c.map { $0 >= 0x30 && $0 <= 0x39 } ?? false }

        // number = [ minus ] int [ frac ] [ exp ]
        // int = zero / ( digit1-9 *DIGIT ); frac = decimal-point 1*DIGIT
        // exp = e [ minus / plus ] 1*DIGIT
        mutating func number() -> Bool {
            _ = eat("-")
            if eat("0") {
                // a zero int is complete
            } else if let c = peek, c >= 0x31 && c <= 0x39 {
                while Parser.isDigit(peek) { i += 1 }
            } else {
                return false
            }
            if eat(".") {
                guard Parser.isDigit(peek) else { return false }
                while Parser.isDigit(peek) { i += 1 }
            }
            if eat("e") || eat("E") {
                if !eat("+") { _ = eat("-") }
                guard Parser.isDigit(peek) else { return false }
                while Parser.isDigit(peek) { i += 1 }
            }
            return true
        }

        static func hexValue(_ c: UInt32?) -> UInt32? {
            guard let c else { return nil }
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x41 + 10
            case 0x61...0x66: return c - 0x61 + 10
            default: return nil
            }
        }

        mutating func hex4() -> UInt32? {
            var v: UInt32 = 0
            for _ in 0..<4 {
                guard let d = Parser.hexValue(peek) else { return nil }
                v = v * 16 + d
                i += 1
            }
            return v
        }

        // string = quotation-mark *char quotation-mark
        // char = unescaped / escape ( %x22 / %x5C / %x2F / %x62 / %x66 / %x6E / %x72 / %x74 / %x75 4HEXDIG )
        // unescaped = %x20-21 / %x23-5B / %x5D-10FFFF
        mutating func string() -> Bool {
            guard eat("\"") else { return false }
            while let c = peek {
                i += 1
                switch c {
                case 0x22: return true
                case 0x5C:
                    guard let e = peek else { return false }
                    i += 1
                    switch e {
                    case 0x22, 0x5C, 0x2F, 0x62, 0x66, 0x6E, 0x72, 0x74: continue
                    case 0x75:
                        guard let unit = hex4() else { return false }
                        if (0xDC00...0xDFFF).contains(unit) { return false }  // project choice
                        if (0xD800...0xDBFF).contains(unit) {
                            guard eat("\\"), eat("u"), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return false }
                        }
                    default: return false
                    }
                case 0x00...0x1F: return false
                default: continue
                }
            }
            return false
        }
    }
}
