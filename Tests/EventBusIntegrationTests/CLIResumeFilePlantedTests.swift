// `listen --resume FILE` in a shared folder (root's cron job with
// `--resume /tmp/orders.pos`): another user can plant `FILE.tmp`, the name
// the CLI writes before its rename. A symlink planted there must not be
// followed (it would truncate and overwrite its target as the listener's
// uid) and must not end up as FILE.
import EventBusTestSupport
import Foundation
import Testing

@Suite("eventbus listen --resume with a planted temporary file")
struct CLIResumeFilePlantedTests {
    @Test func aSymlinkPlantedAtTheTemporaryNameIsNotFollowed() throws {
        let broker = try TestBroker()
        let victim = broker.scratch.file("victim")
        try "precious\n".write(toFile: victim, atomically: false, encoding: .utf8)
        let position = broker.scratch.file("orders.pos")
        try FileManager.default.createSymbolicLink(atPath: position + ".tmp", withDestinationPath: victim)

        let listener = try broker.start(["listen", "--resume", position, "--format", "data", "--count", "1", "order.>"])
        try broker.waitForSubscriptions(1)
        #expect(try broker.run(["publish", "order.created", "1"]).status == 0)
        let run = try listener.wait()
        #expect(run.status == 0 && run.stdout == "1\n", "\(run)")

        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n", "the symlink's target is untouched")
        let attributes = try FileManager.default.attributesOfItem(atPath: position)
        #expect(attributes[.type] as? FileAttributeType == .typeRegular, "FILE is a file of its own, not the planted link")
        #expect(try String(contentsOfFile: position, encoding: .utf8).hasPrefix(#"{"instance":""#))
    }
}
