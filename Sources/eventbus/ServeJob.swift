// One run of `eventbus serve`'s COMMAND for one request (PROTOCOL.md
// "Request/reply (1.3)"): the request's data as JSON (and a LF) on its
// standard input, its standard output kept as the reply's data, its
// standard error passed through to serve's and its first line kept for the
// `error` of a failed run. Every descriptor is non-blocking on serve's side
// and driven by Serve.swift's one poll(2) loop; nothing here waits.
//
// Before editing: the child leads its own process group, so killing it
// past the request's deadline (SIGTERM, then SIGKILL after
// `killGraceNanoseconds`) also ends what it started; a job is finished only
// when the child is reaped and both of its output pipes reached EOF, so no
// pipe and no zombie outlives it. Output beyond `maxReplyBytes` is read and
// dropped (the reply becomes an error), so a chatty COMMAND costs no memory.
@_spi(Package) import EventBusCLI
import EventBusCommandLine
@_spi(Package) import EventBusProtocol
@_spi(Package) import EventBusSystem
import Glibc

/// The most of COMMAND's standard output kept for one reply (the broker's
/// default frame limit, less room for the envelope).
let maxReplyBytes = ProtocolConstants.defaultMaxFrameBytes - 4096

/// Time between SIGTERM and SIGKILL for a COMMAND past its deadline.
let killGraceNanoseconds: Int64 = 1_000_000_000

/// What a finished job answers.
enum JobOutcome {
    /// `{"op":"reply","to":..,"data":..}`
    case data(JSONText)
    /// `{"op":"reply","to":..,"error":..}`
    case failure(String)
    /// Nothing: the deadline passed (the broker has answered `timeout` already).
    case expired
}

final class ServeJob {
    /// The request's reply token and seq.
    let token: String
    let seq: UInt64
    /// CLOCK_MONOTONIC deadline of the request, ns.
    let deadline: Int64
    let child: ChildProcess
    private var input: FileDescriptor?
    private var inputBytes: [UInt8]
    private var inputOffset = 0
    private var output: FileDescriptor?
    private var error: FileDescriptor?
    private var outputBytes: [UInt8] = []
    private var outputTooLarge = false
    private var firstErrorLine: [UInt8] = []
    private var errorLineDone = false
    private(set) var exit: ChildExit?
    /// SIGTERM was sent at the deadline; SIGKILL follows at `killAt`.
    private(set) var killAt: Int64?

    /// Starts COMMAND for one request.
    /// - Throws: `SystemError` from pipe2(2) or posix_spawnp(3) (ENOENT: not found).
    init(command: [String], token: String, seq: UInt64, data: [UInt8], deadline: Int64) throws(SystemError) {
        self.token = token
        self.seq = seq
        self.deadline = deadline
        let stdin = try Pipe(nonBlockingRead: false, nonBlockingWrite: true)
        let stdout: Pipe
        let stderr: Pipe
        do {
            stdout = try Pipe(nonBlockingRead: true, nonBlockingWrite: false)
        } catch {
            stdin.readEnd.close(); stdin.writeEnd.close()
            throw error
        }
        do {
            stderr = try Pipe(nonBlockingRead: true, nonBlockingWrite: false)
        } catch {
            for fd in [stdin.readEnd, stdin.writeEnd, stdout.readEnd, stdout.writeEnd] { fd.close() }
            throw error
        }
        defer { for fd in [stdin.readEnd, stdout.writeEnd, stderr.writeEnd] { fd.close() } }
        do {
            child = try ChildProcess.spawn(command, input: stdin.readEnd, output: stdout.writeEnd, error: stderr.writeEnd)
        } catch {
            for fd in [stdin.writeEnd, stdout.readEnd, stderr.readEnd] { fd.close() }
            throw error
        }
        input = stdin.writeEnd
        output = stdout.readEnd
        self.error = stderr.readEnd
        inputBytes = data + [0x0A]
    }

    /// Whether the child is reaped and its pipes are closed.
    var isDone: Bool { exit != nil && output == nil && error == nil && input == nil }

    /// The descriptors to poll and for what.
    var pollEntries: [PollEntry] {
        var entries: [PollEntry] = []
        if let input { entries.append(PollEntry(input, events: .writable)) }
        if let output { entries.append(PollEntry(output, events: .readable)) }
        if let error { entries.append(PollEntry(error, events: .readable)) }
        return entries
    }

    /// Moves every pipe on as far as it goes now, reaps the child once it
    /// has exited, and kills it past the deadline.
    /// - Parameter buffer: storage for the reads, kept between calls.
    func step(now: Int64, buffer: inout [UInt8]) {
        writeInput()
        readOutput(&buffer)
        readError(&buffer)
        if exit == nil, let ended = try? child.poll() { exit = ended }
        if exit == nil || output != nil || error != nil {
            if let killAt {
                if now >= killAt { child.sendToGroup(signal: SIGKILL) }
            } else if now >= deadline {
                child.sendToGroup(signal: SIGTERM)
                killAt = now + killGraceNanoseconds
            }
        }
        if exit != nil, input != nil { closeInput() }
    }

    /// The next time `step` must run without any descriptor being ready:
    /// the deadline or the SIGKILL, or soon while only the exit is awaited.
    func wakeUp(now: Int64) -> Int64 {
        if exit == nil && output == nil && error == nil { return now + 10_000_000 }
        return killAt ?? deadline
    }

    /// The reply, once `isDone`: COMMAND's standard output as `data` (see
    /// `replyData`) when it exited 0, otherwise an `error`.
    func outcome(command: String, string: Bool) -> JobOutcome {
        if killAt != nil { return .expired }
        switch exit {
        case .exited(0)?:
            if outputTooLarge { return .failure("'\(command)' wrote more than \(maxReplyBytes) bytes") }
            switch replyData(string: string, command: command) {
            case .success(let data): return .data(data)
            case .failure(let failure): return .failure(failure.text)
            }
        case .exited(let code)?:
            let line = String(decoding: firstErrorLine, as: UTF8.self)
            return .failure(line.isEmpty ? "'\(command)' failed (exit status \(code))" : line)
        case .signaled(let signal)?:
            return .failure("'\(command)' was killed by signal \(signal)")
        case nil:
            return .expired
        }
    }

    /// The reply's data from COMMAND's standard output: a JSON value (blank:
    /// null), or with `string` the text as a JSON string (one trailing LF dropped).
    /// - Returns: the data, or the failure text for output that is not JSON.
    private func replyData(string: Bool, command: String) -> Result<JSONText, JobFailure> {
        if string {
            var text = outputBytes
            if text.last == 0x0A { text.removeLast() }
            if text.last == 0x0D { text.removeLast() }
            return .success(JSONText(quoting: String(decoding: text, as: UTF8.self)))
        }
        if isBlank(outputBytes) { return .success(.null) }
        do {
            return .success(try JSONText(validating: outputBytes, layout: .compact))
        } catch {
            return .failure(JobFailure(text: "'\(command)' wrote no JSON value: \(error) (use --string to reply with its output as text)"))
        }
    }

    private func writeInput() {
        guard let input else { return }
        while inputOffset < inputBytes.count {
            let result = try? input.write(inputBytes.span.bytes.extracting(inputOffset...))
            switch result {
            case .complete(let n)?: inputOffset += n
            case .wouldBlock?: return
            case nil: break  // EPIPE: COMMAND does not read its input; that is its business.
            }
            if result == nil { break }
        }
        closeInput()
    }

    private func closeInput() {
        input?.close()
        input = nil
    }

    private func readOutput(_ buffer: inout [UInt8]) {
        Self.drain(&output, &buffer) { chunk in
            if outputBytes.count + chunk.count > maxReplyBytes {
                outputTooLarge = true
                outputBytes = []
            } else if !outputTooLarge {
                outputBytes.append(contentsOf: chunk)
            }
        }
    }

    private func readError(_ buffer: inout [UInt8]) {
        Self.drain(&error, &buffer) { chunk in
            _ = try? FileDescriptor.standardError.writeAll(chunk.span.bytes)  // passed through, as COMMAND wrote it
            guard !errorLineDone else { return }
            for byte in chunk {
                if byte == 0x0A || firstErrorLine.count >= 1024 { errorLineDone = true; break }
                firstErrorLine.append(byte)
            }
            if firstErrorLine.last == 0x0D { firstErrorLine.removeLast() }
        }
    }

    /// Reads `pipe` until it would block, handing each chunk read (in
    /// `buffer`, 64 KiB at most) to `take`; at EOF or a read error closes it
    /// and sets it to nil.
    private static func drain(_ pipe: inout FileDescriptor?, _ buffer: inout [UInt8], _ take: ([UInt8]) -> Void) {
        while let fd = pipe {
            buffer.removeAll(keepingCapacity: true)
            switch try? fd.read(appendingTo: &buffer, limit: 1 << 16) {
            case .complete(let n)? where n > 0:
                take(buffer)
            case .wouldBlock?:
                return
            default:
                fd.close()
                pipe = nil
            }
        }
    }
}

/// A failure text for a reply's `error`.
struct JobFailure: Error {
    var text: String
}
