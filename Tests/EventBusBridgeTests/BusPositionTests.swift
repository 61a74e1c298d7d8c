// Where the export side resumes after a bus reconnect (`BusPosition`): the
// first connection subscribes plainly, a reconnect to the same run asks for
// everything after the highest seq read, a new run starts counting again
// and remembers how far the old one had been read.
import EventBusBridge
import Testing

@Suite struct BusPositionTests {
    /// One step: a `hello` reply naming a run, or an event read with a seq.
    enum Step {
        case hello(String)
        case event(UInt64)
    }

    @Test(arguments: [
        ([], nil, nil),
        ([.hello("r1")], ("r1", 0), nil),
        ([.hello("r1"), .event(4), .event(9), .event(7)], ("r1", 9), nil),
        ([.hello("r1"), .event(9), .hello("r1"), .event(12)], ("r1", 12), nil),
        ([.hello("r1"), .event(9), .hello("r2")], ("r2", 0), ("r1", 9)),
        ([.hello("r1"), .event(9), .hello("r2"), .event(3), .hello("r2")], ("r2", 3), nil),
    ] as [([Step], (String, UInt64)?, (String, UInt64)?)])
    func resumesFromTheHighestSeqOfTheCurrentRun(steps: [Step], resume: (String, UInt64)?, previous: (String, UInt64)?) {
        var position = BusPosition()
        for step in steps {
            switch step {
            case .hello(let run): position.greeted(instance: run)
            case .event(let seq): position.saw(seq)
            }
        }
        #expect(position.resume?.instance == resume?.0 && position.resume?.since == resume?.1)
        #expect(position.restarted == (previous != nil))
        #expect(position.previousRun == previous?.0)
        if let previous { #expect(position.previousLastSeq == previous.1) }
    }
}
