// Large frames validated as their bytes arrive (issue 37): once the
// incomplete frame a connection's splitter holds reaches `scanFromBytes`,
// each `receive` validates the bytes that came (RequestScan.swift), and
// when the frame's LF arrives only its last piece is left to validate. A
// turn's parsing is then bounded by bytes, whatever a frame's size or shape:
// at most about two reads' worth (`scanFromBytes` and a read of the frame
// still to catch up, or a frame read whole, and the last piece of one).
// Before, one 1 MiB frame was one piece of work, parsed when its LF came, and
// root's one-request-at-a-time client waited behind whole parses.
//
// Before editing: the scan belongs to the frame that began at input byte
// `scanFrameStart` (`fedBytes` counts what the splitter was given): a scan
// is dropped when the splitter holds another frame, a backlog, or discards.
// The first piece the splitter hands out is that frame only when it is not
// blank (a blank line is skipped without a call), so a scan is used only
// once it saw a byte other than space, tab or CR (`sawNonBlank`). Its memory
// is charged to the uid with the frame's bytes (`syncInbound`).
@_spi(Package) import EventBusProtocol

extension Broker {
    /// Incomplete frames shorter than this are read whole when their LF
    /// comes, as every frame was (a complete frame is read whole anyway, up
    /// to the read's size); longer ones are scanned as they arrive.
    static let scanFromBytes = 16 << 10

    /// The scan of the frame the splitter will hand out first, if there is one.
    func usableScan(_ connection: Connection) -> RequestScan? {
        guard let scan = connection.input.scan, scan.sawNonBlank, isScanned(connection) else { return nil }
        return scan
    }

    /// Whether `input.scan` is of the incomplete frame the splitter holds now.
    private func isScanned(_ connection: Connection) -> Bool {
        !connection.splitter.hasBacklog && !connection.splitter.discarding && !connection.splitter.pending.isEmpty
            && connection.input.scanFrameStart == connection.input.fedBytes &- connection.splitter.pending.count
    }

    /// Validates what arrived of the large incomplete frame the splitter
    /// holds (a new scan for a new frame); drops the scan when there is none.
    func advanceScan(_ connection: Connection) {
        guard connection.splitter.pending.count >= Broker.scanFromBytes, !connection.splitter.hasBacklog, !connection.splitter.discarding else {
            if connection.input.scan != nil { connection.input.endScan() }
            return
        }
        if connection.input.scan == nil || !isScanned(connection) {
            connection.input.startScan(frameStart: connection.input.fedBytes &- connection.splitter.pending.count)
        }
        guard let scan = connection.input.scan else { return }
        let pending = connection.splitter.pending  // (another reference to the buffer: no byte copied)
        scan.advance(pending.span.bytes)
    }

    /// `receive`'s feeding of the splitter when its incomplete frame was
    /// scanned: the first piece handed out is that frame (or its
    /// `frame_too_large`), decoded from the scan; the rest as always.
    func feed(_ connection: Connection, _ bytes: RawSpan, scanned: RequestScan) -> Bool {
        var scan: RequestScan? = scanned
        let bounded = turnBytes != .max
        var count = PieceCount()
        let finished = connection.splitter.feed(bytes, stopAfter: bounded ? pieceBytesLeft : .max) { piece in
            if let first = scan {
                scan = nil
                connection.input.endScan()
                handle(piece, from: connection, scanned: first)
            } else {
                handle(piece, from: connection)
            }
            return mayReadNextFrame(connection) && (!bounded || count.add(piece))
        }
        if bounded { endPiece(count, finished: finished, connection) }
        return finished
    }

    /// The frame `scan` read as it arrived: the rest validated, then
    /// answered as `handle` answers any frame.
    func handle(_ piece: SplitFrame, from connection: Connection, scanned scan: RequestScan) {
        guard case .frame(let frame) = piece else { return handle(piece, from: connection) }
        scannedFrames &+= 1
        handle(scan.finish(frame), frame, from: connection)
    }
}
