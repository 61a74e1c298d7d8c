// Helpers for EventBusSystemdTests: the probe's path and children started with a
// chosen environment. Processes, temporary directories, sockets and bounded waits
// come from EventBusTestSupport (SpawnedProcess, TemporaryDirectory, LineClient,
// DatagramReceiver, pollUntil).
//
// Before editing: every helper has a bounded wait; a test never hangs on a child.
import EventBusTestSupport

/// The `eventbus-systemd-probe` built next to this test bundle.
let probePath = productsDirectory() + "/eventbus-systemd-probe"

/// A fresh private directory under /tmp (short, so socket paths fit in `sun_path`).
func makeTempDirectory() throws -> TemporaryDirectory { try TemporaryDirectory(prefix: "ebsd.") }

/// Starts `executable` (looked up on PATH) with `arguments`, the runner's environment
/// minus the systemd variables plus `environment`; stdin is /dev/null, stderr goes to
/// `stderrPath` (truncated) when given.
func spawn(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
           stderrTo stderrPath: String? = nil, in directory: TemporaryDirectory) throws -> SpawnedProcess {
    try SpawnedProcess(executable, arguments, in: directory, environment: withoutSystemdVariables(environment),
                       stderrPath: stderrPath)
}

/// Runs a child to completion (see `spawn`), at most 10 s.
func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
         in directory: TemporaryDirectory) async throws -> ProcessOutput {
    try await spawn(executable, arguments, environment: environment, in: directory).wait()
}
