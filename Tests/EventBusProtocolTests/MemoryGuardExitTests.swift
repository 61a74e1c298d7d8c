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
            bytes.withUnsafeBytes { writer.put($0) }
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
            _ = Array("[]".utf8).withUnsafeBytes { JSONScanner.validateQuickly($0, maxDepth: 513) }
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
}
