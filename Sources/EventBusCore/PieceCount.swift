// A bounded piece of work's count (issue 20, issue 35): while several uids
// have input, one `receive` handles at most `Broker.turnBytes` of frames, and
// stops every `framesPerCheck` frames so the server can look at its clock
// (the core reads none): `Broker.stoppedForTimeCheck`, and the server goes on
// with `receive(_:_:at:continuing: true)` while its turn has time.
//
// Before editing: `add` runs after `mayReadNextFrame` (which must see every
// frame: it pauses reading); the bytes are the frames' own plus their LFs,
// about what the splitter's `stopAfter` counts (a CR or a blank line apart).
@_spi(Package) import EventBusProtocol

/// Frames and bytes handled by one bounded `receive`.
struct PieceCount {
    /// Frames between two looks at the server's clock.
    static let framesPerCheck = 8
    var frames = 0
    var bytes = 0
    /// The last `add` asked for the server's time check.
    var stoppedForCheck = false

    /// Counts a frame handled; false when the core must stop for the clock.
    @inline(__always)
    mutating func add(_ piece: SplitFrame) -> Bool {
        frames &+= 1
        switch piece {
        case .frame(let frame): bytes &+= frame.byteCount &+ 1
        case .tooLarge(let size): bytes &+= size &+ 1
        }
        stoppedForCheck = frames % PieceCount.framesPerCheck == 0
        return !stoppedForCheck
    }
}

extension Broker {
    /// After a bounded feed: what is left of the piece's bytes, and whether
    /// it stopped for the server's time check with bytes left to handle.
    func endPiece(_ count: PieceCount, finished: Bool, _ connection: Connection) {
        pieceBytesLeft -= count.bytes
        stoppedForTimeCheck = !finished && count.stoppedForCheck && pieceBytesLeft > 0 && connection.splitter.hasBacklog
    }
}
