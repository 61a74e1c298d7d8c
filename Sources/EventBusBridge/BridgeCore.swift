// The bridge's decisions, with no I/O: which local events go out and how
// (subject, CloudEvents headers), which NATS messages come in and as what
// local publish (with `origin`), loop prevention, the duplicate-node hello,
// drop reports, and the counters. The executable (issue 13, step 2) feeds it
// events and messages and does what it answers.
//
// Before editing, the loop rules, in layers (DESIGN-NOTES-1.1 A.7):
// 1. the NATS connection says `echo:false`;
// 2. only events without `origin` are exported (one hop, like NATS routes);
// 3. imports whose subject names our own node are dropped (`loop`);
// 4. a hello from another instance under our node id stops exporting, loudly.
// And overlapping import patterns make NATS deliver a message once per
// matching subscription: only the lowest matching sid's copy is imported.
import EventBusNATS
@_spi(Package) import EventBusProtocol
import EventBusSession

/// The bridge's state. One owner; not thread-safe.
package struct BridgeCore {
    package let mapping: SubjectMapping
    /// Export patterns (local types that go to NATS).
    package let exports: [Pattern]
    /// Import patterns, minus those another one covers (see `minimalPatterns`).
    package let imports: [Pattern]
    /// This bridge process's random id, sent in hellos: two processes under
    /// one node id tell each other apart by it.
    package let bridgeInstance: String
    /// The local broker's `instance` (from its `hello` reply); `seq` counts within it.
    package private(set) var brokerInstance = ""
    /// False once another bridge instance claimed our node id.
    package private(set) var exporting = true
    /// The other instance that claimed our node id, if any.
    package private(set) var duplicateInstance: String?
    package private(set) var counters = BridgeCounters()
    /// Import subscriptions by sid, each with its pattern, lowest sid first.
    private var importSubscriptions: [(sid: SubscriptionID, pattern: Pattern)] = []
    /// Subjects already parsed (a bridge sees the same few over and over:
    /// a lookup costs a tenth of `SubjectMapping.parse`'s validation);
    /// emptied when it reaches `subjectCacheLimit`.
    private var subjectCache: [String: IncomingSubject] = [:]
    /// The last subject parsed and what it is (before the dictionary: the
    /// NATS parser hands the same String for a run of one subject, so the
    /// compare is a pointer's, where the lookup hashes the bytes).
    private var lastSubject: (text: String, parsed: IncomingSubject)?
    /// (issue 36, third pass) The fixed parts of the last subject's import frames (`handle(_:frame:)`).
    private var importHeads: LocalPublish.FrameHeads?
    /// The last import's instance and source Strings (`CloudEventsHeaders.RecentValues`).
    private var recentValues = CloudEventsHeaders.RecentValues()
    static let subjectCacheLimit = 4096
    /// Export subjects by type name (building one costs five times a lookup), emptied at the same limit.
    private var exportSubjects: [String: Subject] = [:]
    /// The last exported type's decision (`exportDecision`): a run of one
    /// type is decided once, not validated, matched and looked up per event.
    private var lastExport: (type: String, subject: Subject?, skip: ExportSkip)?
    /// The export header lines of the current broker instance.
    private var exportLines: CloudEventsHeaders.ExportLines

    /// - Parameters:
    ///   - bridgeInstance: a random id for this process (e.g. 16 hex digits).
    package init(mapping: SubjectMapping, exports: [Pattern], imports: [Pattern], bridgeInstance: String) {
        self.mapping = mapping
        self.exports = exports
        self.imports = BridgeCore.minimalPatterns(imports)
        self.bridgeInstance = bridgeInstance
        exportLines = CloudEventsHeaders.ExportLines(node: mapping.node, instance: "")
    }

    /// The local bus connection is up; `instance` is the broker's (its `hello` reply).
    package mutating func localBusConnected(instance: String) {
        brokerInstance = instance
        exportLines = CloudEventsHeaders.ExportLines(node: mapping.node, instance: instance)
    }

    // MARK: NATS subscriptions

    /// What to subscribe on NATS: one subject per import pattern
    /// (`PREFIX.evt.*.P`), our hello subject, and, when importing, every
    /// node's drop reports. Pass each sid back to `subscribed(_:to:)`.
    package var natsSubscriptions: [Subject] {
        var subjects = imports.map(mapping.importSubject(for:))
        subjects.append(mapping.helloSubject)
        if !imports.isEmpty { subjects.append(mapping.allDroppedSubject) }
        return subjects
    }

    /// Records the sid the NATS client gave `subject`.
    package mutating func subscribed(_ sid: SubscriptionID, to subject: Subject) {
        guard let pattern = imports.first(where: { mapping.importSubject(for: $0) == subject }) else { return }
        importSubscriptions.append((sid, pattern))
        importSubscriptions.sort { $0.sid < $1.sid }
    }

    /// Whether every type `inner` matches is matched by `outer` (same rules as NATS subject subsumption).
    package static func covers(_ outer: Pattern, _ inner: Pattern) -> Bool {
        let o = outer.segments
        let n = inner.segments
        for i in o.indices {
            if o[i] == ">" { return n.count > i }
            guard i < n.count else { return false }
            if n[i] == ">" { return false }
            if o[i] != "*" && o[i] != n[i] { return false }
        }
        return o.count == n.count
    }

    // MARK: Export

    /// Why a local event is not exported.
    package enum ExportSkip: Equatable, Sendable {
        /// It carries `origin`: it came through a bridge (rule 2).
        case bridged
        /// No export pattern matches its type.
        case notExported
        /// `eventbus.` types are the broker's own and stay local.
        case reserved
        /// Another bridge claims our node id (rule 4).
        case suspended
    }

    package enum ExportDecision: Equatable, Sendable {
        /// Hand this to the NATS client, then report the outcome to `exported(_:)`.
        case publish(OutgoingMessage)
        case skip(ExportSkip)
    }

    /// Decides about one local event. The message's `tag` is the event's `seq`.
    /// An event whose type is not a valid event type is not exported.
    package mutating func export(_ event: RawEvent) -> ExportDecision {
        if event.metadata.isBridged {
            counters.skippedBridged += 1
            return .skip(.bridged)
        }
        let (subject, skip) = event.metadata.type.withByteView { exportSubject(type: $0) }
        guard let subject else { return .skip(skip) }
        let block = CloudEventsHeaders.exportBlock(event, lines: exportLines)
        return .publish(OutgoingMessage(subject: subject, headerBlock: block, payload: event.data, tag: event.metadata.seq))
    }

    /// (issue 36) `export(_:)` for an event read in place from the broker's
    /// frame (`ExportFrame`: it has no `origin`, so it is not bridged).
    /// - Returns: the message for the NATS client's `publish(_:writing:)`,
    ///   whose writer is `writeExport` (the bytes `export(_:)` of the frame's
    ///   `RawEvent` would give); nil when it is not exported (counted as
    ///   `export` counts).
    mutating func export(_ frame: ExportFrame) -> PlacedMessage? {
        guard let subject = exportSubject(type: frame.type).subject else { return nil }
        return PlacedMessage(subject: subject, headerCount: CloudEventsHeaders.exportBlockCount(frame, lines: exportLines),
                             payloadCount: frame.data.count, tag: frame.seq)
    }

    /// (issue 36) Writes the header block and payload of the message `export(_:)` gave for `frame`.
    func writeExport(_ frame: ExportFrame, into w: inout RawWriter) {
        CloudEventsHeaders.writeExport(frame, lines: exportLines, into: &w)
        w.put(frame.data)
    }

    /// The export subject of an event of type `type` (the type's bytes as
    /// sent), or why it is not exported (`exporting` is off: counted).
    private mutating func exportSubject(type: ByteView) -> (subject: Subject?, skip: ExportSkip) {
        let subject: Subject
        if let last = lastExport, last.type.withByteView({ $0.sameBytes(as: type) }) {
            guard let known = last.subject else { return (nil, last.skip) }
            subject = known
        } else {
            let decided = exportDecision(forType: String(decodingUTF8: type))
            lastExport = decided
            guard let known = decided.subject else { return (nil, decided.skip) }
            subject = known
        }
        guard exporting else {
            counters.suspended += 1
            return (nil, .suspended)
        }
        return (subject, .suspended)
    }

    /// What the type of an event decides (the same for every event of that
    /// type): its export subject, or why it is not exported.
    private mutating func exportDecision(forType name: String) -> (type: String, subject: Subject?, skip: ExportSkip) {
        guard let type = EventType(name) else { return (name, nil, .notExported) }
        if type.isReserved { return (name, nil, .reserved) }
        guard exports.contains(where: { $0.matches(type) }) else { return (name, nil, .notExported) }
        return (name, exportSubject(for: type), .notExported)
    }

    private mutating func exportSubject(for type: EventType) -> Subject {
        if let known = exportSubjects[type.name] { return known }
        let subject = mapping.exportSubject(for: type)
        if exportSubjects.count >= BridgeCore.subjectCacheLimit { exportSubjects.removeAll(keepingCapacity: true) }
        exportSubjects[type.name] = subject
        return subject
    }

    /// Counts an export the NATS client accepted (`queued` or `held`); its
    /// refusals (`tooLarge`, `dropped`) are counted by the client itself.
    package mutating func exported(_ outcome: PublishOutcome) {
        switch outcome {
        case .queued, .held: counters.exported += 1
        case .tooLarge, .dropped, .closed: break
        }
    }

    // MARK: Import

    /// What to do with a message from NATS.
    package enum Inbound: Equatable, Sendable {
        /// Publish this on the local bus, then report the outcome to `imported(_:)`.
        case publishLocally(LocalPublish)
        /// (issue 36, third pass) Its `publish` frame was written into the
        /// bus output (`handle(_:frame:)`); report the outcome to `imported(_:)` as for `publishLocally`.
        case written(EventType)
        /// Dropped and counted (`reason`); `detail` is for a debug log.
        case dropped(DropReason, detail: String)
        /// Another bridge claims our node id: exporting has stopped. Log it
        /// loudly; publish `reply` on NATS when present (so it notices too).
        case duplicateNode(otherInstance: String, reply: OutgoingMessage?)
        /// A node reported exports it lost (`PREFIX.ctl.NODE.dropped`).
        case remoteGap(node: NodeName, count: Int, sinceSeq: UInt64?, instance: String?)
        /// Nothing to do (our own hello, a second copy for an overlapping pattern, an unknown subject).
        case ignored
    }

    /// Decides about one NATS message.
    package mutating func handle(_ message: Message) -> Inbound {
        var unused: [UInt8] = []
        return handle(message, frame: &unused, writing: false)
    }

    /// (issue 36, third pass) `handle`, with the usual import (a header block
    /// that is an eventbus bridge's export block `import` takes whole:
    /// `CloudEventsHeaders.exportBlockValues`) written straight into `frame`
    /// as its `publish` frame, the bytes `LocalPublish.appendFrame` writes for
    /// the `LocalPublish` `handle` answers: then `.written`, with no String,
    /// `Imported` or `LocalPublish` made. Every other answer is `handle`'s,
    /// by the same checks in the same order, and nothing is written.
    package mutating func handle(_ message: Message, frame: inout [UInt8]) -> Inbound {
        handle(message, frame: &frame, writing: true)
    }

    private mutating func handle(_ message: Message, frame: inout [UInt8], writing: Bool) -> Inbound {
        if message.subject == mapping.helloSubject.text { return handleHello(message) }
        if let node = mapping.dropReportNode(message.subject) { return handleDropReport(message, from: node) }
        switch parsedSubject(message.subject) {
        case .other:
            return .ignored
        case .badType(let subject):
            return drop(.badType, "subject \(subject.prefix(300).debugDescription) is not PREFIX.evt.NODE.TYPE with a valid node and type")
        case .event(let node, let type):
            if importSubscriptions.count > 1, let first = importSubscriptions.first(where: { $0.pattern.matches(type) }), first.sid != message.sid {
                return .ignored  // the same message, delivered again for an overlapping pattern
            }
            if node == mapping.node { return drop(.loop, "\(message.subject) names our own node") }
            if type.isReserved { return drop(.badType, "\(type.name) is reserved for the broker") }
            var values: CloudEventsHeaders.ExportBlockValues?
            var fields: CloudEventsHeaders.Imported?
            if writing, let block = message.headerBlock {
                values = CloudEventsHeaders.exportBlockValues(block.span.bytes, node: node, type: type)
            }
            if values == nil {
                var problem: String?
                fields = CloudEventsHeaders.import(message.headerBlock, node: node, type: type, recent: &recentValues, problem: &problem)
                if fields == nil { return drop(.badHeader, "\(message.subject): \(problem ?? "bad headers")") }
            }
            let data: JSONText?
            switch BridgeCore.localData(message.payload) {
            case .absent: data = nil
            case .value(let text): data = text
            case .invalid: return drop(.badData, "\(message.subject): the payload is not one JSON value")
            }
            if let fields {
                return .publishLocally(LocalPublish(type: type, data: data, source: fields.source, id: fields.id, origin: fields.origin))
            }
            // `fields` is nil only when `values` was read from the block.
            if let values, let block = message.headerBlock {
                if importHeads?.subject != message.subject { importHeads = LocalPublish.FrameHeads(subject: message.subject, type: type, node: node) }
                if let heads = importHeads {
                    LocalPublish.appendFrame(heads: heads, block: block.span.bytes, values: values, data: data, to: &frame)
                }
            }
            return .written(type)
        }
    }

    private mutating func parsedSubject(_ subject: String) -> IncomingSubject {
        if let last = lastSubject, last.text == subject { return last.parsed }
        if let known = subjectCache[subject] {
            lastSubject = (subject, known)
            return known
        }
        let parsed = mapping.parse(subject)
        lastSubject = (subject, parsed)
        if subjectCache.count >= BridgeCore.subjectCacheLimit { subjectCache.removeAll(keepingCapacity: true) }
        subjectCache[subject] = parsed
        return parsed
    }

    /// How the local publish of an import ended.
    package enum ImportOutcome: Equatable, Sendable {
        case accepted
        /// The broker answered `forbidden`.
        case denied
        /// The local bus was unreachable or refused it for another reason.
        case lost
    }

    /// Counts the outcome of `count` `publishLocally`s.
    package mutating func imported(_ outcome: ImportOutcome, count: Int = 1) {
        guard count > 0 else { return }
        switch outcome {
        case .accepted: counters.imported += count
        case .denied: counters.dropped[.denied, default: 0] += count
        case .lost: counters.dropped[.localBus, default: 0] += count
        }
    }

    private mutating func drop(_ reason: DropReason, _ detail: String) -> Inbound {
        counters.count(reason)
        return .dropped(reason, detail: detail)
    }

    /// A NATS payload as the local `data`.
    enum LocalData: Equatable {
        /// Empty payload: publish without `data` (`null`).
        case absent
        /// One JSON value: kept byte for byte when it is exactly one value on
        /// one line (what an eventbus bridge sends), compacted otherwise
        /// (spread over lines, or blanks around it), since the bus's frames are lines.
        case value(JSONText)
        /// Not one JSON value.
        case invalid
    }

    static func localData(_ payload: [UInt8]) -> LocalData {
        if payload.isEmpty { return .absent }
        do {
            return .value(try JSONText(validating: payload, layout: .asGiven))
        } catch {
            return .invalid
        }
    }

    // MARK: Hello and drop reports

    /// `PREFIX.ctl.NODE.hello` with `{"node":"host-a","instance":"<bridge instance>","reply":false}`:
    /// publish it after every NATS link-up (`ClientConfiguration.announcements`).
    package var hello: OutgoingMessage { helloMessage(reply: false) }

    private func helloMessage(reply: Bool) -> OutgoingMessage {
        var payload: [UInt8] = Array("{\"node\":".utf8)
        JSONString.appendQuoted(mapping.node.text, to: &payload)
        payload.append(contentsOf: ",\"instance\":".utf8)
        JSONString.appendQuoted(bridgeInstance, to: &payload)
        payload.append(contentsOf: ",\"reply\":\(reply)}".utf8)
        return OutgoingMessage(subject: mapping.helloSubject, payload: payload)
    }

    private mutating func handleHello(_ message: Message) -> Inbound {
        let fields = BridgeCore.members(message.payload)
        guard let instance = fields.strings["instance"], !instance.isEmpty else { return .ignored }
        if instance == bridgeInstance { return .ignored }
        exporting = false
        duplicateInstance = instance
        let isReply = fields.bools["reply"] ?? false
        return .duplicateNode(otherInstance: instance, reply: isReply ? nil : helloMessage(reply: true))
    }

    private mutating func handleDropReport(_ message: Message, from node: NodeName) -> Inbound {
        guard node != mapping.node else { return .ignored }
        let fields = BridgeCore.members(message.payload)
        guard let count = fields.integers["count"] else { return .ignored }
        counters.remoteReports += 1
        counters.remoteLost += Int(clamping: count)
        return .remoteGap(node: node, count: Int(clamping: count), sinceSeq: fields.integers["since_seq"], instance: fields.strings["instance"])
    }

    /// `PREFIX.ctl.NODE.dropped` with
    /// `{"node":"host-a","bridge":"<bridge instance>","instance":"<broker instance>","count":30,"since_seq":51}`
    /// (`since_seq`: the `seq` of the first lost event). Static and pure so a
    /// `ClientConfiguration.gapReport` closure can call it without touching
    /// the core (it runs under the NATS client's lock).
    package static func droppedReport(_ summary: DropSummary, mapping: SubjectMapping, bridgeInstance: String, brokerInstance: String) -> OutgoingMessage {
        var payload: [UInt8] = Array("{\"node\":".utf8)
        JSONString.appendQuoted(mapping.node.text, to: &payload)
        payload.append(contentsOf: ",\"bridge\":".utf8)
        JSONString.appendQuoted(bridgeInstance, to: &payload)
        payload.append(contentsOf: ",\"instance\":".utf8)
        JSONString.appendQuoted(brokerInstance, to: &payload)
        payload.append(contentsOf: ",\"count\":\(summary.count)".utf8)
        if let first = summary.firstTag { payload.append(contentsOf: ",\"since_seq\":\(first)".utf8) }
        payload.append(0x7D)
        return OutgoingMessage(subject: mapping.droppedSubject, payload: payload)
    }

    /// Counts `count` exports the local broker dropped before the bridge read
    /// them (its `dropped` notice, PROTOCOL.md "Semantics"), and returns the
    /// report that tells the other nodes (`PREFIX.ctl.NODE.dropped`).
    package mutating func localOverflow(count: UInt64, sinceSeq: UInt64) -> OutgoingMessage {
        counters.dropped[.localOverflow, default: 0] += Int(clamping: count)
        return BridgeCore.droppedReport(DropSummary(count: Int(clamping: count), firstTag: sinceSeq), mapping: mapping,
                                        bridgeInstance: bridgeInstance, brokerInstance: brokerInstance)
    }

    /// The counters merged with the NATS client's and the bus connection's.
    package func status(nats: ClientStatistics, bus: BusStatus = BusStatus()) -> BridgeStatus {
        BridgeStatus(node: mapping.node, counters: counters, nats: nats, bus: bus, exporting: exporting)
    }

    /// String, integer and boolean top-level members of a JSON object (others ignored; nothing for non-objects).
    static func members(_ payload: [UInt8]) -> (strings: [String: String], integers: [String: UInt64], bools: [String: Bool]) {
        var strings: [String: String] = [:]
        var integers: [String: UInt64] = [:]
        var bools: [String: Bool] = [:]
        do {
            let raw = payload.span.bytes
            guard let members = try? JSONObject.members(raw) else { return (strings, integers, bools) }
            for member in members {
                let token = member.value
                switch token.kind {
                case .string: strings[member.key] = JSONString.decode(raw, token)
                case .number(integer: true):
                    integers[member.key] = UInt64(String(decodingUTF8: raw.extracting(token.start..<token.end)))
                case .true: bools[member.key] = true
                case .false: bools[member.key] = false
                default: break
                }
            }
        }
        return (strings, integers, bools)
    }
}
