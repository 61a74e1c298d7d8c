// The byte view (ByteView.swift) against the bytes it was made from: its
// reads, ranges, searches and comparisons, and the bridges in and out
// (its bounds checks that stop the process are in MemoryGuardExitTests).
@_spi(Package) @testable import EventBusProtocol
import Testing

@Suite struct ByteViewTests {
    @Test func readsTheBytesItWasMadeFrom() {
        let bytes = Array("0123456789abcdef-".utf8)
        bytes.withByteView { view in
            #expect(view.count == bytes.count)
            #expect(Array(view) == bytes)
            #expect(view.array == bytes)
            #expect(view[16] == 0x2D)
            #expect(view.word(at: 0) == UInt64(littleEndian: 0x3736_3534_3332_3130))
            #expect(view.loadUnaligned(fromByteOffset: 9, as: UInt32.self).littleEndian == 0x6362_6139)
            #expect(view.extracting(10..<16).array == Array("abcdef".utf8))
            #expect(view.extracting(from: 16).array == [0x2D])
            #expect(view.extracting(5..<5).isEmpty)
        }
    }

    @Test func findsAByteOnlyInTheRangeAsked() {
        Array("a\nbc\nd".utf8).withByteView { view in
            #expect(view.firstIndex(of: 0x0A) == 1)
            #expect(view.firstOffset(of: 0x0A, in: 2..<6) == 4)
            #expect(view.firstOffset(of: 0x0A, in: 5..<6) == nil)
            #expect(view.firstOffset(of: 0x0A, in: 3..<3) == nil)
            #expect(view.extracting(2..<6).firstIndex(of: 0x0A) == 2, "offsets of the extracted view")
        }
    }

    @Test("compares bytes 8 at a time and the rest one by one", arguments: [0, 1, 7, 8, 9, 16, 23])
    func comparesBytes(_ length: Int) {
        let a = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        for flip in 0..<length {
            var b = a
            b[flip] ^= 0x20
            a.withByteView { x in b.withByteView { y in #expect(!x.sameBytes(as: y)) } }
        }
        a.withByteView { x in a.map { $0 }.withByteView { y in #expect(x.sameBytes(as: y)) } }
        a.withByteView { x in (a + [0]).withByteView { y in #expect(!x.sameBytes(as: y)) } }
        let copy = a.map { $0 }
        let spansAgree = a.span.bytes.sameBytes(as: copy.span.bytes)
        #expect(spansAgree)
    }

    @Test func matchesAStaticStringOnlyWithinItself() {
        Array("{\"op\":\"publish\"".utf8).withByteView { view in
            #expect(view.hasBytes("publish", at: 7))
            #expect(!view.hasBytes("publish", at: 8))
            #expect(!view.hasBytes("publish\"x", at: 7), "the view ends first")
            #expect(view.hasBytes("", at: view.count))
            #expect(!view.hasBytes("{", at: -1))
        }
        #expect(ByteView("abc").array == Array("abc".utf8))
        #expect(ByteView().isEmpty)
    }

    @Test func bridgesToASpanAndBack() {
        let bytes = Array("span bytes".utf8)
        let back = bytes.span.bytes.withByteView { view in view.withSpan { Array(copying: $0) } }
        #expect(back == bytes)
        #expect("héllo".withByteView { String(decodingUTF8: $0) } == "héllo")
        var out: [UInt8] = [1]
        bytes.withByteView { out.append(copying: $0.extracting(0..<4)) }
        #expect(out == [1] + Array("span".utf8))
        let words: (UInt64, UInt16) = (0x0807_0605_0403_0201, 0x0A09)
        #expect(withByteView(of: words) { Array($0.extracting(0..<10)) } == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    }

    @Test func aWriterAppendsOnlyWhatItWrote() {
        var out: [UInt8] = [0x78]
        out.appendWritten(bound: RawWriter.slack + 8) { w in
            w.put("ab")
            w.put(int: 1234)
            Array("cd".utf8).withByteView { w.put($0) }
        }
        #expect(out == Array("xab1234cd".utf8))
    }
}
