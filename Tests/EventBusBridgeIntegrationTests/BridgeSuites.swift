// The parent of every suite of this target, so that they run one test at a
// time (`.serialized` applies to the suites inside).
//
// Before editing: these tests block a thread for seconds at a time (reads,
// polls, clusters starting) and load the machine; run side by side they
// would hold both of Swift Concurrency's pool threads on a 2-CPU machine,
// and the async tests of other targets (socket activation) would miss their
// deadlines. One at a time they hold one thread at most.
import Testing

@Suite("eventbus-bridge", .serialized)
struct BridgeSuites {}
