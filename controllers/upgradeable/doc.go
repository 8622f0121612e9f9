// Package upgradeable tells OLM when replacing the operator is unsafe.
//
// Under OLM (classic, v0) every operator has an OperatorCondition named after its CSV, and OLM
// passes that name to the operator's Pods in OPERATOR_CONDITION_NAME. While the condition's
// Upgradeable is False, OLM does not replace the CSV with a newer one. The operator sets it
// False while any fleet is in the middle of something that hands a disk or a member over from
// one step to the next: a rollout or scale (Progressing with reason LifecycleProgress), a
// replacement handoff (a member Pod held with the replacement label and finalizer), or a
// deletion. The message names those fleets. Once none is left it sets Upgradeable True.
//
// Outside OLM (no OPERATOR_CONDITION_NAME), and under OLM v1, which has no OperatorCondition,
// nothing is added: the operator neither reads nor writes OperatorConditions.
//
// The work is a leader-only manager Runnable: it re-decides on every CelldFleet event from the
// manager's cache and every Interval (held Pods are read from the fleet namespaces' caches,
// which send no event here), and writes through operator-lib's conditions package only when
// the verdict differs from the condition as it is.
package upgradeable
