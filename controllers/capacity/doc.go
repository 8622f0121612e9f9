// Package capacity holds the capacity policy's decision: given spec.capacity, the latest
// collection of member samples, the trend of earlier collections and the durable history, how
// many members the fleet should have and the one reason why.
//
// Nothing here reads the cluster or the clock, and nothing runs in the background. The
// reconciler collects, passes the time in, hands the planner Decision.Target, and after a step
// it took calls History.Record and saves the history on the storage reservation. Decide is a
// plain function of its input, so a restarted operator that reads the same history decides the
// same way; only the stabilization windows, which it keeps in memory, start over.
//
// The rules, in the words of the spec:
//
//   - Modes. Shadow recommends and never moves the target. ScaleOut adds, at most scaleOutStep
//     members per step and never above maxReplicas. Automatic also removes, one member per
//     step and never below minReplicas. External leaves spec.replicas to one /scale writer and
//     computes nothing (ExternalOwner).
//   - Manual precedence. A spec.replicas edit the workload does not have yet wins over every
//     mode until it is applied (ManualOverride); the windows start again behind it. A workload
//     stopped by hand returns at spec.replicas whatever the policy says.
//   - Evidence. A sample counts only when the member is Ready, its /state load view and its
//     Metrics API sample are at most maxAgeSeconds old, and the Metrics API averaged over a
//     window between minWindowSeconds and maxWindowSeconds. Every member must be counted for
//     the policy to decide anything: a member not Ready holds every step (PendingCapacity,
//     IneffectiveCapacity after provisioningTimeoutSeconds), and a member without a usable
//     sample does too (IncompleteMetrics).
//   - Windows. Samples are counted at most once per sampleIntervalSeconds, and each one must
//     carry newer source timestamps than the last (RepeatedSamples). Demand is high when any
//     member is at or above cpuHighMillicores or memoryHighMiB or celld reports it pressured,
//     and low when every member is below cpuLowMillicores and memoryLowMiB. A step needs a
//     window of unbroken high (or low) samples, at least minSamples of them spanning at least
//     scaleOutStabilizationSeconds (or scaleInStabilizationSeconds). A gap longer than
//     maxAgeSeconds, a change of members or a contrary sample in between breaks the window
//     (WindowInterrupted); an edit of spec.capacity restarts it (PolicyChanged).
//   - Cooldowns. After any step, manual or policy, another addition waits
//     scaleOutCooldownSeconds and a removal scaleInCooldownSeconds (RateLimited). The times
//     of the steps are history, so a restart keeps the cooldowns.
//   - Redistribution. After a policy addition, further additions wait while the effect is
//     observed for redistributionObservationSeconds (ObservingRedistribution). Two additions
//     in a row after which no newcomer works, no incumbent is relieved and demand did not grow
//     hold the next one (LoadNotRedistributed).
//   - Survivors. A contraction of an Automatic or External fleet needs evidence that the
//     members that stay can take the removed member's load: the whole current membership
//     sampled and fresh, and each survivor still below the high thresholds and within its
//     requests once the load is spread. Without it the decision keeps the applied count and
//     says what is missing (Decision.CapacityUncertain); the reconciler reports it as
//     CapacityUncertain.
//
// docs/capacity.md lists every reason with what it asks the user to do; a test keeps that list
// and Reasons equal.
package capacity
