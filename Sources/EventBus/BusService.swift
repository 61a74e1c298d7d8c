// `BusService`: the shape of swift-service-lifecycle's `Service` (issue 34),
// which cannot be depended on here (no outside packages). An application that
// uses ServiceLifecycle makes the bus one of its services with one line:
// `extension EventBus: @retroactive Service {}`: the requirement is the same
// `func run() async throws`, ended by task cancellation.

/// Something that runs for as long as the task that calls `run()` wants it,
/// and shuts down gracefully when that task is cancelled (the shape of
/// swift-service-lifecycle's `Service`).
public protocol BusService: Sendable {
    /// Runs until the task is cancelled (then shuts down gracefully and
    /// returns) or the service ends by itself (returns, or throws why).
    func run() async throws
}

extension EventBus: BusService {}
