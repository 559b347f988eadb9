package main

import (
	corev1 "k8s.io/api/core/v1"
)

// gatedCondition is the VersionGateReady condition: whether the reconciler
// status admits the agent's release. Its times are left to the provider
// and the node controller.
func gatedCondition(ready bool, reason, msg string) corev1.NodeCondition {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.NodeCondition{Type: conditionGated, Status: st, Reason: reason, Message: msg}
}
