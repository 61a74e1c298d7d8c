// `import EventBusClient`, the library's module name before issue 34, still
// compiles for one release: it re-exports the `EventBus` module (this file
// imports only the old name).
import EventBusClient
import Testing

@Suite struct DeprecatedModuleTests {
    @Test func theOldModuleNameReexportsTheLibrary() {
        let configuration = EventBus.Configuration(bus: .path("/tmp/x.sock"))
        #expect(configuration.maxEnqueued == 10_000)
        #expect(EventBusError.cancelled.description == "the task was cancelled while waiting for the event bus")
    }
}
