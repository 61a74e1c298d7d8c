// Exit tests (Swift Testing `#expect(processExitsWith:)`, each body run in a
// child process) for the preconditions that keep the protocol's writers and
// scanners inside their memory: a bound computed too small must stop the
// process, never write past a buffer (issue 35). They hold in release builds too.
@_spi(Package) @testable import EventBusProtocol
import Testing

@Suite struct MemoryGuardExitTests {
    @Test func theEventWriterStopsBeforeWritingPastItsBuffer() async {
        await #expect(processExitsWith: .failure) {
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 128, alignment: 8)
            var writer = RawWriter(buffer, capacity: 128)
            let bytes = [UInt8](repeating: 0x61, count: 65)  // 65 + the 64-byte slack > 128
            bytes.withByteView { writer.put($0) }
        }
    }

    @Test func theEventWriterRefusesABufferSmallerThanItsSlack() async {
        await #expect(processExitsWith: .failure) {
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 63, alignment: 8)
            _ = RawWriter(buffer, capacity: 63)
        }
    }

    @Test func theQuickScanRefusesADepthPastItsFixedStack() async {
        await #expect(processExitsWith: .failure) {
            _ = JSONScanner.validateQuickly(Array("[]".utf8).span.bytes, maxDepth: 513)
        }
    }

    @Test func aRequestFrameIsBuiltOnlyFromAWholeEventFrame() async {
        await #expect(processExitsWith: .failure) {
            var out: [UInt8] = []
            Array(#"{"op":"event"}"#.utf8).withUnsafeBytes {  // no LF: the slice would start past its end
                FrameEncoder.appendRequest(event: $0.bytes, token: { _ in }, timeoutMilliseconds: 1, to: &out)
            }
        }
    }

    // The byte view's bounds (ByteView.swift): `extracting` and the memchr
    // search are checked in every build; the subscript and loads in debug
    // builds (this suite's), as `UnsafeRawBufferPointer`'s.

    @Test func aByteViewRefusesARangePastItsEnd() async {
        await #expect(processExitsWith: .failure) {
            _ = Array("abc".utf8).withByteView { $0.extracting(1..<4).count }
        }
    }

    @Test func aByteViewRefusesARangeBeforeItsStart() async {
        await #expect(processExitsWith: .failure) {
            _ = Array("abc".utf8).withByteView { $0.extracting(-1..<2).count }
        }
    }

    @Test func aByteViewSearchesOnlyWithinItself() async {
        await #expect(processExitsWith: .failure) {
            _ = Array("abc\n".utf8).withByteView { $0.extracting(0..<3).firstOffset(of: 0x0A, in: 0..<4) }
        }
    }

    @Test func aByteViewReadPastItsEndStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            _ = Array("abcdefgh".utf8).withByteView { $0.extracting(0..<7).word(at: 0) }
        }
    }

    @Test func aTimestampIsMadeOnlyFromTwentyFourBytes() async {
        await #expect(processExitsWith: .failure) {
            _ = Array("2026-11-29T13:00:00.123".utf8).withByteView { TimestampBytes($0) }
        }
    }
}
