// Package configmapsource delivers a node agent's assigned configuration
// from one key of a Kubernetes ConfigMap to a checkpoint.Controller, by
// watching the ConfigMap rather than polling it.
//
// It is the one part of the checkpoint family that needs client-go, so it
// lives apart: the store and the controller compile without it. See
// [Source] for what it guarantees.
package configmapsource
