// Moving bytes through a descriptor: read(2), write(2)/send(2), and the
// gathered sendmsg(2), with the two buffers the broker's event loop keeps
// for them: `ReadBuffer` (the one buffer every connection is read into) and
// `IOVectors` (the iovec array a gathered write hands the kernel).
//
// Before editing: EINTR is retried and EAGAIN is `.wouldBlock`
// (Errors.swift); sockets are written with `MSG_NOSIGNAL`, so a peer that is
// gone gives EPIPE, never SIGPIPE.
//
// Raw memory (issue 35): this is the syscall layer's one file that moves
// bytes, so the pointers the kernel needs are made here and nowhere else.
// - The calls take spans (`read(into:)` appends what the kernel wrote to an
//   `OutputSpan`, so no byte is read uninitialised; `write`/`writeAll` take a
//   `RawSpan`); their pointers exist for one syscall.
// - `ReadBuffer` owns its bytes (allocated and zeroed once, freed in its
//   deinit): every byte is initialised, a read writes at its start, and
//   `withBytes` lends the first bytes as a span for the call only.
// - `IOVectors` owns its iovec array (allocated once, freed in its deinit),
//   but not the bytes the iovecs point at: whoever appends a span keeps that
//   memory alive and unchanged until the vectors are written or emptied
//   (the broker fills them from a connection's outbound queue and writes
//   them at once; the journal sink from a local array it holds).
import Glibc

extension FileDescriptor {
    /// read(2) into the free capacity of `buffer`, appending what was read.
    /// `.complete(0)` is end of file. Retries EINTR; EAGAIN gives `.wouldBlock`.
    /// - Throws: `SystemError("read", errno)`.
    package func read(into buffer: inout OutputSpan<UInt8>) throws(SystemError) -> IOResult<Int> {
        try buffer.withUnsafeMutableBufferPointer { (storage, initialized) throws(SystemError) -> IOResult<Int> in
            let result = try read(into: UnsafeMutableRawPointer(storage.baseAddress.map { $0 + initialized }), count: storage.count - initialized)
            if case .complete(let n) = result { initialized += n }
            return result
        }
    }

    /// read(2) of at most `limit` bytes, appended to `bytes` (e.g. a read
    /// buffer emptied with `removeAll(keepingCapacity: true)` first).
    /// - Throws: `SystemError("read", errno)`.
    package func read(appendingTo bytes: inout [UInt8], limit: Int) throws(SystemError) -> IOResult<Int> {
        var result = IOResult<Int>.wouldBlock
        try bytes.append(addingCapacity: limit) { (free: inout OutputSpan<UInt8>) throws(SystemError) in result = try read(into: &free) }
        return result
    }

    /// read(2) of at most `limit` bytes into the start of `buffer` (at most
    /// its capacity); the bytes read are then `buffer.withBytes(count: n)`.
    /// `.complete(0)` is end of file. Retries EINTR; EAGAIN gives `.wouldBlock`.
    /// - Throws: `SystemError("read", errno)`.
    package func read(into buffer: borrowing ReadBuffer, limit: Int) throws(SystemError) -> IOResult<Int> {
        try read(into: buffer.storage.baseAddress, count: min(limit, buffer.capacity))
    }

    /// read(2) into `count` bytes at `start`, memory the caller owns.
    private func read(into start: UnsafeMutableRawPointer?, count: Int) throws(SystemError) -> IOResult<Int> {
        guard let n = try retryingInterrupts("read", { Glibc.read(rawValue, start, count) }) else { return .wouldBlock }
        return .complete(n)
    }

    /// Writes with send(2) and `MSG_NOSIGNAL` on sockets (no SIGPIPE), write(2)
    /// otherwise. Retries EINTR; EAGAIN gives `.wouldBlock`.
    /// - Throws: `SystemError("write", errno)`, e.g. `EPIPE` when the peer is gone.
    package func write(_ bytes: RawSpan) throws(SystemError) -> IOResult<Int> {
        try bytes.withUnsafeBytes { (raw) throws(SystemError) -> IOResult<Int> in
            guard let n = try retryingInterrupts("write", { () -> Int in
                let sent = Glibc.send(rawValue, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL))
                if sent == -1 && Glibc.errno == ENOTSOCK { return Glibc.write(rawValue, raw.baseAddress, raw.count) }
                return sent
            }) else { return .wouldBlock }
            return .complete(n)
        }
    }

    /// Writes all of `bytes`, waiting with poll(2) when the fd would block.
    /// - Throws: `SystemError` from write(2) or poll(2).
    package func writeAll(_ bytes: RawSpan) throws(SystemError) {
        var offset = 0
        while offset < bytes.byteCount {
            switch try write(bytes.extracting(droppingFirst: offset)) {
            case .complete(let n): offset += n
            case .wouldBlock: _ = try poll(.writable, timeoutMilliseconds: -1)
            }
        }
    }

    /// sendmsg(2) of every range in `vectors`, in order, with `MSG_NOSIGNAL`:
    /// a gathered write.
    /// - Returns: bytes written, or `.wouldBlock`.
    /// - Throws: `SystemError("sendmsg", errno)`.
    package func write(_ vectors: borrowing IOVectors) throws(SystemError) -> IOResult<Int> {
        var message = msghdr()
        message.msg_iov = vectors.base
        message.msg_iovlen = vectors.count
        guard let n = try retryingInterrupts("sendmsg", { Glibc.sendmsg(rawValue, &message, Int32(MSG_NOSIGNAL)) }) else {
            return .wouldBlock
        }
        return .complete(n)
    }
}

/// Bytes to read into, owned: allocated and zeroed once, freed with the
/// value. A read fills it from the start (`FileDescriptor.read(into:limit:)`)
/// and `withBytes` lends what it read.
package struct ReadBuffer: ~Copyable {
    fileprivate let storage: UnsafeMutableRawBufferPointer

    /// A buffer of `capacity` bytes (at least 1), 16-byte aligned.
    package init(capacity: Int) {
        storage = .allocate(byteCount: max(capacity, 1), alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit { storage.deallocate() }

    /// Its size: the most one read takes.
    package var capacity: Int { storage.count }

    /// Calls `body` with its first `count` bytes (what the last read wrote)
    /// as a span, valid during the call; the next read changes them.
    package func withBytes<R>(count: Int, _ body: (RawSpan) -> R) -> R {
        precondition(count >= 0 && count <= storage.count, "read buffer span out of range")
        return body(UnsafeRawBufferPointer(rebasing: storage[0..<count]).bytes)
    }
}

/// The ranges of one gathered write: an iovec array of fixed capacity,
/// owned (allocated once, freed with the value). The bytes the ranges name
/// are not: they must stay alive and unchanged until the vectors are written
/// (`FileDescriptor.write(_:)`) or emptied (see the file comment).
package struct IOVectors: ~Copyable {
    fileprivate let base: UnsafeMutablePointer<iovec>
    /// How many ranges it holds at most (sendmsg(2) takes up to IOV_MAX, 1,024).
    package let capacity: Int
    /// How many ranges it holds.
    package private(set) var count = 0

    /// Room for `capacity` ranges (at least 1).
    package init(capacity: Int) {
        self.capacity = max(capacity, 1)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    package var isEmpty: Bool { count == 0 }
    package var isFull: Bool { count == capacity }

    /// Adds the range `bytes` covers (not a copy: see the type comment).
    package mutating func append(_ bytes: RawSpan) {
        precondition(count < capacity, "more ranges than the vectors hold")
        base[count] = bytes.withUnsafeBytes { iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count) }
        count += 1
    }

    /// Forgets every range.
    package mutating func removeAll() { count = 0 }

    /// Lends the iovec array and its count to a C call that takes them, e.g.
    /// sd_journal_sendv(3), for the call only.
    package func withIOVecs<R>(_ body: (UnsafePointer<iovec>, Int) -> R) -> R {
        body(UnsafePointer(base), count)
    }
}
