// A property test of the broker's unmanaged memory (docs/RELIABILITY.md:
// the history ring written in place, shared chunks and the outbound queues'
// references kept `Uncounted`): random mixes of small, large
// (> 2 KiB) and very large (> 64 KiB) events, retained or not, over many
// arenas, to subscribers under drop-old, drop-new and disconnect, with
// partial writes, `since` and `last` replays, clears, closes mid-way and
// policy reloads; every frame a client reads must be one that was published,
// byte for byte. Meant to be run under AddressSanitizer too
// (`swift build --build-tests --sanitize=address`), where a read of a freed
// chunk is reported even when the bytes happen to survive.
//
// Before editing: the data of publish k is `"k-"` followed by a fill whose
// length and letter follow from k, so a frame is checked from its own bytes
// (type, data, seq against the publisher's `ok`) without a model of drops.
@testable import EventBusCore
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import EventBusTestSupport
import Testing

@Suite("Frame integrity")
struct FrameIntegrityPropertyTests {
    /// What publish k sent.
    struct Published {
        var type: String
        var data: String
        var retained: Bool
    }

    static func policy(_ text: String) throws -> AccessPolicy {
        try AccessPolicy.load([PolicySource(path: "p.conf", text: text)], resolver: TableNameResolver(), brokerUID: 0)
    }

    static let types = ["t.a", "t.b", "t.c", "u.a"]
    static let patterns = ["t.*", "t.a", ">", "u.a", "t.c", "*.a"]

    /// A size: mostly small, some past the copy limit (shared chunks), a few past an arena.
    static func size(_ random: inout SeededGenerator) -> Int {
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<70: Int.random(in: 0...400, using: &random)
        case 70..<82: Int.random(in: 1700...2100, using: &random)  // around the copy limit
        case 82..<96: Int.random(in: 2100...9000, using: &random)
        default: Int.random(in: 65_000...70_000, using: &random)  // past an arena
        }
    }

    /// Seeds with history bounds: a ring of several arenas, a short one, one
    /// smaller than a large event (emptied by it), and one of 16 arenas.
    @Test(arguments: [(1, 300, 400_000), (2, 20, 150_000), (3, 5, 4_000), (4, 2_000, 1 << 20)] as [(UInt64, Int, Int)])
    func everyFrameReadIsOneThatWasPublished(seed: UInt64, historyEvents: Int, historyBytes: Int) throws {
        var random = SeededGenerator(seed: seed)
        let maxOutbound = Int.random(in: 80_000...300_000, using: &random)
        let h = BrokerHarness {
            $0.retention.historyEvents = historyEvents
            $0.retention.historyBytes = historyBytes
            $0.maxOutboundBytes = maxOutbound
            $0.quotas.maxRetainedBytes = 600_000
        }
        var published: [Published] = []
        var seqOf: [Int: Int] = [:]  // publish k -> its seq
        let publishers = [h.connect(uid: 1000), h.connect(uid: 1001), h.connect(uid: 0)]
        var subscribers: [Connection] = []
        var closing: Set<ConnectionID> = []
        var disconnects = 0
        var framesChecked = 0
        var kinds: [String: Int] = [:]  // what the checked frames covered
        let context = "seed \(seed), history \(historyEvents)/\(historyBytes), outbound \(maxOutbound)"

        func check(_ frames: [Frame], of connection: Connection) {
            for frame in frames {
                guard frame.op == "event", let type = frame.type, !type.hasPrefix("eventbus.") else { continue }
                framesChecked += 1
                guard let data = frame.string("data"), let dash = data.firstIndex(of: "-"), let k = Int(data[..<dash]),
                      k < published.count else {
                    Issue.record("\(context): an event no one published: \(frame.raw.prefix(200))")
                    continue
                }
                let sent = published[k]
                if frame.bool("retained") == true { kinds["retained", default: 0] += 1 }
                if frame.bool("replayed") == true { kinds["replayed", default: 0] += 1 }
                if frame.raw.utf8.count > 64 << 10 { kinds["past an arena", default: 0] += 1 }
                else if frame.raw.utf8.count > OutboundQueue.copyLimitBytes { kinds["shared", default: 0] += 1 }
                #expect(type == sent.type && data == sent.data, "\(context): event \(k) read as \(frame.raw.prefix(200))")
                if let seq = frame.seq, let expected = seqOf[k] {
                    #expect(seq == expected, "\(context): event \(k) with seq \(seq), published as \(expected)")
                }
                #expect(frame.raw.hasSuffix("}"), "\(context): frame of event \(k) cut short")
            }
        }

        /// Reads (part of) a connection's queue and checks what came out; a
        /// connection the broker closes is then read to its end and closed.
        func read(_ connection: Connection, maxBytes: Int) {
            check(h.read(connection, maxBytes: maxBytes), of: connection)
            collectCloses()
        }

        /// Notes the connections the broker decided to close (slow consumers
        /// under disconnect, half-closed ones left without subscriptions).
        func collectCloses() {
            for effect in h.takeEffects() {
                if case .close(let id, let timing) = effect, timing != .now {
                    closing.insert(id)
                    if timing == .afterWrite { disconnects += 1 }
                }
            }
        }

        func publish() {
            let k = published.count
            let type = Self.types[Int.random(in: 0..<Self.types.count, using: &random)]
            let fill = Character(Unicode.Scalar(UInt8(0x61 + k % 26)))
            let data = "\(k)-" + String(repeating: fill, count: Self.size(&random))
            let retain = Int.random(in: 0..<5, using: &random) == 0
            published.append(Published(type: type, data: data, retained: retain))
            let publisher = publishers[Int.random(in: 0..<publishers.count, using: &random)]
            h.send(publisher, #"{"op":"publish","type":"\#(type)","data":"\#(data)","retain":\#(retain),"req":\#(k)}"#)
            for reply in h.read(publisher) where reply.op == "ok" {
                if let req = reply.int("req"), let seq = reply.seq {
                    seqOf[req] = seq
                }
            }
            collectCloses()
        }

        for i in 0..<1500 {
            let roll = Int.random(in: 0..<100, using: &random)
            switch roll {
            case 0..<55:
                publish()
            case 55..<70 where !subscribers.isEmpty:
                let s = subscribers[Int.random(in: 0..<subscribers.count, using: &random)]
                read(s, maxBytes: Int.random(in: 0..<3, using: &random) == 0 ? .max : Int.random(in: 1...20_000, using: &random))
            case 70..<80 where subscribers.count < 12:
                let s = h.connect(uid: UInt32.random(in: 1000...1002, using: &random))
                let overflow = ["drop-old", "drop-new", "disconnect"][Int.random(in: 0..<3, using: &random)]
                let pattern = Self.patterns[Int.random(in: 0..<Self.patterns.count, using: &random)]
                var extra = ""
                if Bool.random(using: &random) { extra += #","since":\#(UInt64.random(in: 0...h.broker.seq, using: &random))"# }
                if Bool.random(using: &random) { extra += #","last":true"# }
                h.send(s, #"{"op":"hello","overflow":"\#(overflow)"}"#, #"{"op":"subscribe","type":"\#(pattern)"\#(extra)}"#)
                subscribers.append(s)
                read(s, maxBytes: Int.random(in: 0...30_000, using: &random))
            case 80..<85 where !subscribers.isEmpty:
                // A second pattern, with a replay, on a connection that may hold some already.
                let s = subscribers[Int.random(in: 0..<subscribers.count, using: &random)]
                let pattern = Self.patterns[Int.random(in: 0..<Self.patterns.count, using: &random)]
                h.send(s, #"{"op":"subscribe","type":"\#(pattern)","since":\#(UInt64.random(in: 0...h.broker.seq, using: &random)),"last":true}"#)
            case 85..<90 where !subscribers.isEmpty:
                // Closed mid-way, with a queue partly written.
                let at = Int.random(in: 0..<subscribers.count, using: &random)
                read(subscribers[at], maxBytes: Int.random(in: 1...5_000, using: &random))
                h.close(subscribers[at])
                closing.remove(subscribers[at].id)
                subscribers.remove(at: at)
            case 90..<93:
                h.send(publishers[2], #"{"op":"clear","type":"\#(Self.types[Int.random(in: 0..<Self.types.count, using: &random)])"}"#)
            case 93..<95:
                let text = Bool.random(using: &random) ? "deny subscribe t.c\n" : "# open\n"
                h.record(h.broker.reloadPolicy(try Self.policy(text), at: h.now))
            case 95..<96:
                h.elapsedNanoseconds += 1_000_000_000  // replay credit comes back
            case 96..<97 where !subscribers.isEmpty:
                h.endOfInput(subscribers[Int.random(in: 0..<subscribers.count, using: &random)])  // half-closed: still receives
            default:
                for s in subscribers { read(s, maxBytes: .max) }
            }
            // Connections the broker decided to close: the server writes what is left, then closes.
            for id in closing {
                guard let at = subscribers.firstIndex(where: { $0.id == id }) else { continue }
                check(h.read(subscribers[at]), of: subscribers[at])
                if !subscribers[at].isClosed { h.close(subscribers[at]) }
                subscribers.remove(at: at)
            }
            closing.removeAll()
            collectCloses()
            if i % 100 == 0 { h.checkInvariants() }
        }
        for s in subscribers { read(s, maxBytes: .max) }
        // Replays of the whole ring and every retained event at the end.
        let last = h.connect(uid: 0)
        h.send(last, #"{"op":"subscribe","type":">","since":0,"last":true}"#)
        check(h.read(last), of: last)
        let ring = h.broker.retention.history
        for i in 0..<ring.count {
            let entry = ring[i]
            let raw = Array(entry.frame)
            #expect(raw.last == 0x0A, "\(context): ring entry \(entry.seq) does not end a frame")
            check([parseFrame(Array(raw.dropLast()))], of: last)
        }
        // Not vacuous: every kind of frame was read, and the queues dropped and disconnected.
        #expect(ring.heldChunks <= ring.count + 3, "\(context): \(ring.heldChunks) chunks held for \(ring.count) events")
        #expect(framesChecked > 200, "\(context): only \(framesChecked) frames checked")
        for kind in ["retained", "replayed", "shared", "past an arena"] {
            #expect(kinds[kind, default: 0] > 0, "\(context): no \(kind) frame read (\(kinds))")
        }
        h.closeAll()
    }
}
