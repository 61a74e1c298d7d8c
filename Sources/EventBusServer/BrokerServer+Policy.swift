// SIGHUP: read the policy files again and hand the result to the core
// (PROTOCOL.md "Access policy (1.1)", reload; docs/SYSTEMD.md "Reload").
// All or nothing: an unreadable or invalid file leaves the policy in force,
// and every error is logged as `file:line: message`. The service manager
// hears RELOADING=1 before and READY=1 after (sd_notify(3)).
//
// Before editing: the core does the swap and the revocations in one step
// (`Broker.reloadPolicy`) and announces the outcome with its own
// `eventbus.policy.reloaded` / `eventbus.policy.refused` event, which
// `eventbus reload --wait` waits for; keep one of the two on every path.
import EventBusCore
import EventBusPolicy
import EventBusSystem

extension BrokerServer {
    /// Reloads the policy from `configuration.policyFiles`.
    func reloadPolicy() {
        hooks.reloading()
        defer { hooks.ready() }
        let files = configuration.policyFiles
        switch files.load(brokerUID: configuration.broker.ownCredentials.uid) {
        case .success(let policy):
            apply(broker.reloadPolicy(policy, at: currentTime()))
        case .failure(let error):
            let generation = broker.policyGeneration
            for line in error.lines {
                logger.error("failed to reload the access policy: \(line); keeping the policy in force (generation \(generation))",
                             fields: [("EVENTBUS_POLICY_GENERATION", "\(generation)")])
            }
            apply(broker.refusePolicyReload(error.description, at: currentTime()))
        }
    }

    /// A line for the log about the policy in force, e.g. `access policy
    /// generation 2 from 3 files: /usr/share/eventbus/policy.conf ...`.
    package static func policySummary(_ policy: AccessPolicy, generation: UInt64) -> String {
        guard policy.hasFiles else { return "access policy generation \(generation): no policy file (everything allowed; bridge for \(policy.fileLessBridgeUIDs))" }
        let count = policy.paths.count
        return "access policy generation \(generation) from \(count) file\(count == 1 ? "" : "s"): \(policy.paths.joined(separator: " "))"
    }
}
