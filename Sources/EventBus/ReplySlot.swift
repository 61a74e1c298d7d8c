// How an async call of the library waits for its answer and stops waiting
// when its task is cancelled (issue 34): `ReplySlot` is resumed exactly once,
// by the answer or by the cancellation, whichever comes first; the other is
// ignored.
//
// Before editing: the state machine's completion for the request stays
// registered until the broker answers or the connection ends (replies are
// matched in order, so a request cannot be taken back once written); after a
// cancellation it only finds the slot resumed and returns. A request the bus
// has not written yet checks `isCancelled` where it would be written (under
// the writer lock, `BusCore.change`) and is then never sent.
import Synchronization

/// One waiting call's answer: resumed once, by `complete` or by `cancel`.
final class ReplySlot<Value: Sendable>: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Result<Value, EventBusError>, Never>)
        case cancelledEarly
        case done
    }

    private let state = Locked(State.idle)
    private let cancelled = Atomic<Bool>(false)

    /// Whether the waiting task was cancelled (the answer, if any, is ignored).
    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Hands the answer to the waiting task, unless it stopped waiting.
    func complete(_ result: Result<Value, EventBusError>) {
        let continuation: CheckedContinuation<Result<Value, EventBusError>, Never>? = state.withLock { state in
            guard case .waiting(let continuation) = state else {
                if case .idle = state { state = .done }
                return nil
            }
            state = .done
            return continuation
        }
        continuation?.resume(returning: result)
    }

    /// The waiting task was cancelled: it stops waiting now with `.cancelled`.
    func cancel() {
        cancelled.store(true, ordering: .releasing)
        let continuation: CheckedContinuation<Result<Value, EventBusError>, Never>? = state.withLock { state in
            switch state {
            case .idle:
                state = .cancelledEarly
                return nil
            case .waiting(let continuation):
                state = .done
                return continuation
            case .cancelledEarly, .done:
                return nil
            }
        }
        continuation?.resume(returning: .failure(.cancelled))
    }

    /// Starts the call with `start` (given this slot's `complete`) and waits
    /// for its answer; a cancelled task stops waiting at once and throws
    /// `.cancelled`, then `onCancel` runs (to forget what need not wait).
    func wait(start: (@escaping Completion<Value>) -> Void, onCancel: @escaping @Sendable () -> Void = {}) async throws(EventBusError) -> Value {
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, EventBusError>, Never>) in
                let early = state.withLock { state -> Result<Value, EventBusError>? in
                    switch state {
                    case .idle:
                        state = .waiting(continuation)
                        return nil
                    case .cancelledEarly:
                        state = .done
                        return .failure(.cancelled)
                    case .waiting, .done:
                        preconditionFailure("a ReplySlot waits once")
                    }
                }
                if let early {
                    continuation.resume(returning: early)
                } else {
                    start { self.complete($0) }
                }
            }
        } onCancel: {
            self.cancel()
            onCancel()
        }
        return try result.get()
    }
}
