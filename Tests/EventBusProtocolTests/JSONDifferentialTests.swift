// Differential check of the JSON scanner: over the corpus and a few thousand
// seeded random mutations of valid frames, the scanner must agree with the
// plain RFC 8259 reference validator, and every place where Foundation's
// `JSONSerialization` disagrees with that judge must be one of Foundation's
// known deviations (listed below and printed), so a new kind of disagreement
// is looked at rather than ignored.
@_spi(Package) import EventBusProtocol
import Foundation
import Testing

@Suite("JSON differential")
struct JSONDifferentialTests {
    /// Valid frames the mutations start from.
    static let seeds: [String] = [
        #"{"op":"publish","req":7,"type":"order.created","data":{"id":"3f9a","total":12.5,"items":[1,2,3]}}"#,
        #"{"op":"subscribe","type":"order.>","req":"a-1"}"#,
        #"{"op":"hello","client":"billing","echo":true,"overflow":"drop-old"}"#,
        #"{"op":"publish","type":"t","data":[true,false,null,-0.5e-3,"\u00e9\uD83D\uDE00\n",{"":{}}]}"#,
        "{\"op\":\"publish\",\"type\":\"x\",\"data\":\"héllo € 😀\"}",
        #"{ "op" : "ping" , "req" : -9007199254740992 }"#,
        #"[1e400,123456789012345678901234567890,0,-0,1E+2,"\/\\\"\b\f\r\t"]"#,
    ]

    /// Bytes a mutation may insert: JSON punctuation, digits, escapes, and
    /// every interesting UTF-8 lead/continuation/illegal byte.
    static let alphabet: [UInt8] = Array(#"{}[]":,\ .-+0123456789eEtfnulrsabu"#.utf8)
        + [0x00, 0x09, 0x0A, 0x0D, 0x1F, 0x7F, 0x80, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]

    static func mutate(_ input: [UInt8], _ rng: inout SeededGenerator) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let op = Int.random(in: 0..<7, using: &rng)
            let at = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)
            switch op {
            case 0 where !bytes.isEmpty: bytes[at] = alphabet.randomElement(using: &rng)!
            case 1: bytes.insert(alphabet.randomElement(using: &rng)!, at: at)
            case 2 where !bytes.isEmpty: bytes.remove(at: at)
            case 3: bytes = Array(bytes[..<at])
            case 4 where !bytes.isEmpty:
                let end = min(bytes.count, at + Int.random(in: 1...8, using: &rng))
                bytes.insert(contentsOf: bytes[at..<end], at: at)
            case 5 where at + 1 < bytes.count: bytes.swapAt(at, at + 1)
            case 6 where !bytes.isEmpty: bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &rng)
            default: break
            }
        }
        return bytes
    }

    /// The inputs: the corpus, the seeds, and 4000 mutations (seed 0x5EED).
    static func inputs() -> [[UInt8]] {
        var result = JSONCorpus.all.map(\.bytes) + seeds.map(utf8)
        var rng = SeededGenerator(seed: 0x5EED)
        for n in 0..<4000 {
            result.append(mutate(utf8(seeds[n % seeds.count]), &rng))
        }
        return result
    }

    static func foundationAccepts(_ bytes: [UInt8]) -> Bool {
        (try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) != nil
    }

    /// Foundation's known deviations from RFC 8259, by the judge's verdict.
    /// Returns the name of the deviation that explains a disagreement, or nil.
    static func knownFoundationDeviation(_ bytes: [UInt8], judgeAccepts: Bool) -> String? {
        if judgeAccepts {
            // Valid JSON that Foundation refuses: it converts every number to a
            // Double and gives up when the magnitude overflows (>= ~1.8e308).
            if numberTokens(bytes).contains(where: { Double($0)?.isInfinite == true }) {
                return "number whose magnitude overflows a Double refused"
            }
            return nil
        }
        // Invalid JSON that Foundation accepts.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return "UTF-8 byte order mark skipped" }
        if bytes.count >= 2 && (bytes[0] == 0 || bytes[1] == 0 || bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF])) {
            return "UTF-16/UTF-32 input detected and transcoded"
        }
        let compact = bytes.filter { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        for i in 0..<max(0, compact.count - 1) where compact[i] == 0x2C && (compact[i + 1] == 0x5D || compact[i + 1] == 0x7D) {
            return "trailing comma before ] or } accepted"
        }
        return nil
    }

    @Test func scannerAgreesWithTheReferenceValidatorOnCorpusAndMutations() {
        var disagreements: [String] = []
        var accepted = 0
        let all = Self.inputs()
        for bytes in all {
            let judge = ReferenceJSONValidator.isValid(bytes)
            let ours = scannerAccepts(bytes)
            if judge { accepted += 1 }
            if ours != judge {
                disagreements.append("scanner \(ours ? "accepts" : "rejects") \(Self.show(bytes))")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(20).joined(separator: "\n"))")
        // The mutations must exercise both verdicts, or the check proves little.
        #expect(accepted > 300 && accepted < all.count - 1000, "accepted \(accepted) of \(all.count)")
    }

    /// Every byte value, and a few multi-byte sequences, at every offset of a
    /// string long enough for the scanner's 8-bytes-at-a-time path.
    @Test func everyByteAtEveryOffsetOfALongStringAgreesWithTheReference() {
        var inserts: [[UInt8]] = (0...255).map { [UInt8($0)] }
        inserts += [[0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0xED, 0xA0, 0x80], [0x5C, 0x6E], [0x5C, 0x22]]
        var failures: [String] = []
        for insert in inserts {
            for offset in 0..<20 {
                for tail in [0, 1, 7, 8, 9] {
                    let body = [UInt8](repeating: 0x61, count: offset) + insert + [UInt8](repeating: 0x62, count: tail)
                    let bytes = [0x22] + body + [0x22]
                    if scannerAccepts(bytes) != ReferenceJSONValidator.isValid(bytes) { failures.append(Self.show(bytes)) }
                    let inObject = utf8(#"{"k":"#) + bytes + utf8("}")
                    if scannerAccepts(inObject) != ReferenceJSONValidator.isValid(inObject) { failures.append(Self.show(inObject)) }
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(10))")
    }

    @Test func referenceValidatorAgreesWithTheCorpusVerdicts() {
        for entry in JSONCorpus.all {
            #expect(ReferenceJSONValidator.isValid(entry.bytes) == entry.valid, "\(entry.name)")
        }
    }

    @Test func everyFoundationDisagreementIsAKnownDeviation() {
        var byDeviation: [String: Int] = [:]
        var unexplained: [String] = []
        for bytes in Self.inputs() {
            let judge = ReferenceJSONValidator.isValid(bytes)
            guard Self.foundationAccepts(bytes) != judge else { continue }
            if let name = Self.knownFoundationDeviation(bytes, judgeAccepts: judge) {
                byDeviation[name, default: 0] += 1
            } else {
                unexplained.append("Foundation \(judge ? "rejects valid" : "accepts invalid") \(Self.show(bytes))")
            }
        }
        // The list for the record (RFC 8259 as the judge).
        for (name, count) in byDeviation.sorted(by: { $0.key < $1.key }) {
            print("JSONSerialization deviates from RFC 8259: \(name) (\(count) inputs)")
        }
        #expect(unexplained.isEmpty, "\(unexplained.prefix(20).joined(separator: "\n"))")
    }

    /// The number tokens of a valid JSON text (outside strings).
    static func numberTokens(_ bytes: [UInt8]) -> [String] {
        var tokens: [String] = []
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == 0x22 {  // skip a string
                i += 1
                while i < bytes.count && bytes[i] != 0x22 { i += bytes[i] == 0x5C ? 2 : 1 }
                i += 1
            } else if b == 0x2D || (0x30...0x39).contains(b) {
                let start = i
                while i < bytes.count, Array("0123456789.eE+-".utf8).contains(bytes[i]) { i += 1 }
                tokens.append(String(decoding: bytes[start..<i], as: UTF8.self))
            } else {
                i += 1
            }
        }
        return tokens
    }

    static func show(_ bytes: [UInt8]) -> String {
        if let text = String(validating: bytes, as: UTF8.self), text.count < 200 { return text.debugDescription }
        return bytes.prefix(120).map { String($0, radix: 16) }.joined(separator: " ")
    }
}
