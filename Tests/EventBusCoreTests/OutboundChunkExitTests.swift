// Exit test (Swift Testing, the body runs in a child process) for the
// precondition that keeps a frame writer inside its outbound chunk: a writer
// that says it wrote more than the chunk holds stops the process rather than
// queue bytes past the chunk's memory (issue 35).
@testable import EventBusCore
import Testing

@Suite struct OutboundChunkExitTests {
    @Test func aWriterThatOverranItsChunkStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            _ = OutboundChunk.make(capacity: 16) { _ in 17 }
        }
    }

    @Test func aWriterWithinItsChunkIsKept() {
        let chunk = OutboundChunk.make(capacity: 16) { $0.storeBytes(of: 0x41, as: UInt8.self); return 1 }
        #expect(chunk.header.used == 1)
    }
}
