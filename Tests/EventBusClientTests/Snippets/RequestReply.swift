// snippet.hide
// docs/CLIENT.md "Request/reply and queue groups (1.3)".
import EventBus

enum RequestReplySnippet {
// snippet.show
struct Thumbnail: Codable, Sendable {
    var path: String
}

struct MakeThumbnail: BusRequest {
    static let requestType = "thumb.make"
    typealias Reply = Thumbnail
    var path: String
}

struct ThumbnailFailed: Error {}

// The server: runs until its task is cancelled; several processes in one group share the requests.
func serveThumbnails(bus: EventBus) async throws {
    try await bus.serve(MakeThumbnail.self, group: "thumbnailers") { request in
        guard request.path.hasSuffix(".png") else { throw ThumbnailFailed() }   // the requester's .serviceError
        return Thumbnail(path: request.path + ".thumb.png")
    }
}

// The client: the reply, typed; each failure a case of EventBusError.
func thumbnail(of path: String, bus: EventBus) async -> Thumbnail? {
    do {
        return try await bus.request(MakeThumbnail(path: path), timeout: .seconds(5))
    } catch .noResponders {
        print("no thumbnailer is running")
    } catch .timeout, .noReply {
        print("the thumbnailer did not answer")
    } catch .serviceError(_, let message) {
        print("the thumbnailer failed: \(message)")
    } catch {
        print(error)
    }
    return nil
}

// Workers sharing jobs: each event goes to one member; leave() finishes this member's share.
struct Job: BusEvent {
    static let eventType = "jobs.run"
    var id: Int
}

func work(bus: EventBus) async throws {
    let jobs = bus.events(of: Job.self, group: "workers")
    let stopping = Task {
        try await Task.sleep(for: .seconds(60))
        await jobs.leave()                     // the loop below ends after the last job given to us
    }
    for try await job in jobs { print("job", job.event.id) }
    stopping.cancel()
}
// snippet.hide
}
