// ProcessEnvironment and ProcessIdentity read what libc reads. The tests do
// not call setenv(3): other tests run in parallel threads that spawn
// processes, and glibc's setenv is not safe against a concurrent environ walk.
import EventBusSystem
import Glibc
import Testing

@Suite("Process environment and identity")
struct ProcessEnvironmentTests {
    @Test func valuesAndTheWholeEnvironmentAgreeWithGetenv() throws {
        let variables = ProcessEnvironment.variables()
        #expect(!variables.isEmpty)
        for name in ["PATH", "HOME"] + variables.keys.prefix(20) {
            let expected = getenv(name).map { String(cString: $0) }
            #expect(ProcessEnvironment.value(name) == expected, "\(name)")
            #expect(variables[name] == expected, "\(name)")
        }
        #expect(ProcessEnvironment.value("EVENTBUS_SURELY_UNSET_\(getpid())") == nil)
    }

    @Test func identityIsTheCallersOwn() {
        #expect(ProcessIdentity.current == PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()))
        #expect(ProcessIdentity.effectiveUID == geteuid())
    }
}
