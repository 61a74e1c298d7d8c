// snippet.hide
// docs/CLIENT.md "The seeds": taps in order from synchronous code.
import EventBus

enum TapsSnippet {
// snippet.show
struct PostLikeChanged: BusEvent {
    static let eventType = "post.like.changed"
    var post: Int
    var liked: Bool
    var by: String
}

@MainActor final class LikeButton {
    let bus: EventBus
    var liked = false { didSet { try? bus.enqueue(PostLikeChanged(post: 1, liked: liked, by: "me"), from: self) } }
    init(bus: EventBus) { self.bus = bus }
}

// A worker thread or a command-line tool: `post` returns once the frame is written.
func importLikes(_ likes: [PostLikeChanged], bus: EventBus) throws {
    for like in likes { try bus.post(like) }
}
// snippet.hide
}
