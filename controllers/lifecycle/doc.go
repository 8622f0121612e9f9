// Package lifecycle holds the pure decisions of a StatefulSet fleet's lifecycle: how many
// members to apply this reconcile (growth runs, one-step contraction, full stop), which one
// self-healing action to take, and how a lifecycle reason projects onto the Ready, Progressing
// and Blocked conditions.
//
// Nothing here reads the cluster or the clock. The reconciler observes the workload, each
// member's Pod and claim, and the time into a Facts value (PodFacts, ClaimFacts and
// WorkloadFacts turn live objects into facts), and every function answers from that value
// alone. The operator stores nothing about the lifecycle (ADR 0024): a growth run is read
// from which claims exist, a replacement deadline from when the member stopped being Ready,
// the absorb window from the other members' Ready transitions. Running a decision twice on
// the same facts gives the same answer, which is what makes a crashed or restarted operator
// safe.
package lifecycle
