// Command buildservers builds the etcd, kube-apiserver and
// kube-controller-manager binaries that the tests and examples run, printing
// progress, so that a CI run can show how long that stage takes. Tests build
// them on first use anyway; this only does it up front.
package main
