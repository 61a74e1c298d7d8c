// The envelope's duplicate-key check (UnknownKeys.swift, Envelope.swift)
// against a plain model: the top-level keys decoded in order
// (`JSONObject.members`), the first one already seen before is the one
// named in `bad_request`. Random frames on both sides of the check's two
// ways (up to 16 unknown keys pairwise, more through the bit arrays),
// keys written plain, with escapes, non-ASCII, empty, known and unknown, and
// every line of the fuzz corpus.
import Foundation
import Testing
@_spi(Package) @testable import EventBusProtocol

@Suite("Unknown keys")
struct UnknownKeysTests {
    /// What the model says of a frame that is one JSON object: the first
    /// key, in frame order, that repeats an earlier one (decoded), or nil.
    private func modelRepeat(_ frame: [UInt8]) -> String?? {
        guard let members = frame.withByteView({ try? JSONObject.members($0) }) else { return .none }
        var seen = Set<String>()
        for member in members {
            if !seen.insert(member.key).inserted { return .some(member.key) }
        }
        return .some(nil)
    }

    /// Checks the decoder's verdict on `frame` against the model's.
    private func expectAgreement(_ frame: [UInt8], _ note: @autoclosure () -> String = "") {
        // Not an object, or not line-safe: bad_frame, not this check.
        guard case .some(let repeated) = modelRepeat(frame),
              frame.withByteView({ (try? JSONScanner.validate($0, lineSafe: true)) != nil }) else { return }
        let d = Decoded(bytes: frame)
        let message = d.error?.message ?? ""
        if message.hasPrefix("req must") { return }  // a bad or repeated req is told first
        if let repeated {
            #expect(d.code == .badRequest && message == "duplicate key \(JSONString.quoted(repeated)) in frame",
                    "\(note()): expected the repeat \(repeated), got \(message)")
        } else if repeated == nil {
            #expect(!message.hasPrefix("duplicate key"), "\(note()): no repeat, got \(message)")
        }
    }

    /// A key as JSON text: plain, or with its first character (or all) escaped.
    private func spelled(_ key: String, _ rng: inout SeededGenerator) -> String {
        guard let first = key.unicodeScalars.first, Int.random(in: 0..<3, using: &rng) == 0 else { return "\"\(key)\"" }
        if Bool.random(using: &rng) {
            return "\"" + key.unicodeScalars.map { String(format: "\\u%04x", $0.value) }.joined() + "\""
        }
        return "\"" + String(format: "\\u%04X", first.value) + String(key.unicodeScalars.dropFirst()) + "\""
    }

    /// `{"op":"ping", ...}` with `count` members whose keys come from a pool
    /// of `pool` names (so repeats are likely when `pool` is small).
    private func randomFrame(count: Int, pool: Int, _ rng: inout SeededGenerator) -> [UInt8] {
        let special = ["", "é", "k\u{2603}", "type", "data", "source", "id", "client", "x y", "\\", "\""]
        var members = [#""op":"ping""#]
        for _ in 0..<count {
            let n = Int.random(in: 0..<pool, using: &rng)
            var key = n < special.count && Int.random(in: 0..<4, using: &rng) == 0 ? special[n] : "k\(n)"
            if key == "\\" || key == "\"" {
                members.append("\"\\\(key)\":1")  // an escaped backslash or quote
                continue
            }
            if Bool.random(using: &rng) { key += "-longer-than-sixteen-bytes" }
            members.append(spelled(key, &rng) + ":" + (Bool.random(using: &rng) ? "1" : #"{"a":[1,2]}"#))
        }
        if Int.random(in: 0..<4, using: &rng) == 0 { members.shuffle(using: &rng) }
        return utf8("{" + members.joined(separator: Bool.random(using: &rng) ? "," : " , ") + "}")
    }

    @Test func fewKeysAgreeWithTheModel() {
        var rng = SeededGenerator(seed: 20)
        for round in 0..<3000 {
            let frame = randomFrame(count: Int.random(in: 0...20, using: &rng), pool: Int.random(in: 1...40, using: &rng), &rng)
            expectAgreement(frame, "round \(round): \(String(decoding: frame, as: UTF8.self))")
        }
    }

    @Test func manyKeysAgreeWithTheModel() {
        var rng = SeededGenerator(seed: 21)
        for round in 0..<300 {
            let count = Int.random(in: 17...3000, using: &rng)
            // Pools from all-repeats to (nearly always) all different.
            let pool = [count / 8 + 1, count, count * 4, count * 1000][round % 4]
            expectAgreement(randomFrame(count: count, pool: pool, &rng), "round \(round), \(count) keys from \(pool)")
        }
    }

    @Test func theEarliestRepeatIsNamedWhereverItIs() {
        // 2,000 different keys, then a repeat placed anywhere, and a later one.
        let keys = (0..<2000).map { "\"k\($0)\":1" }
        for (at, earlier, later) in [(1, 0, 1999), (1000, 999, 5), (1999, 1998, 0), (17, 16, 3)] {
            var members = keys
            members.insert("\"k\(earlier)\":2", at: at + 1)
            members.append("\"\\u006b\(later)\":3")
            let d = Decoded("{" + #""op":"ping","# + members.joined(separator: ",") + "}")
            #expect(d.error?.message == "duplicate key \"k\(earlier)\" in frame", "at \(at)")
        }
        // A known key repeated before an unknown one, and after.
        #expect(Decoded(#"{"op":"ping","type":1,"x":1,"type":2,"x":2}"#).error?.message == #"duplicate key "type" in frame"#)
        #expect(Decoded(#"{"op":"ping","x":1,"type":1,"x":2,"type":2}"#).error?.message == #"duplicate key "x" in frame"#)
        let many = (0..<100).map { "\"k\($0)\":1" }.joined(separator: ",")
        #expect(Decoded("{" + #""op":"ping","# + many + #","type":1,"k5":2,"type":2}"#).error?.message == #"duplicate key "k5" in frame"#)
        #expect(Decoded("{" + #""op":"ping","type":1,"# + many + #","type":2,"k5":2}"#).error?.message == #"duplicate key "type" in frame"#)
    }

    @Test func manyCopiesOfOneKeyAndNoRepeatAtAll() {
        let copies = String(repeating: #""same":1,"#, count: 100_000)
        #expect(Decoded("{" + copies + #""op":"ping"}"#).error?.message == #"duplicate key "same" in frame"#)
        let escaped = String(repeating: #""\u0073ame":1,"#, count: 50_000)
        #expect(Decoded("{" + escaped + #""op":"ping"}"#).error?.message == #"duplicate key "same" in frame"#)
        // 150,000 different keys whose text differs only late (the hash covers every byte).
        let different = (0..<150_000).map { "\"a-long-common-prefix-\($0)\":1," }.joined()
        let d = Decoded("{" + different + #""op":"ping","req":1}"#)
        #expect(d.error == nil && d.req == "1")
    }

    @Test func theFuzzCorpusAgreesWithTheModel() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../fuzz/corpus").standardized
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus.path).sorted()
        #expect(files.count > 10)
        var frames = 0
        for file in files {
            let bytes = try [UInt8](Data(contentsOf: corpus.appendingPathComponent(file)))
            // Each line a frame (as the splitter cuts them), and the whole file.
            for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: true) {
                expectAgreement(Array(line), file)
                frames += 1
            }
            expectAgreement(bytes, file)
        }
        #expect(frames > 40)
    }
}
