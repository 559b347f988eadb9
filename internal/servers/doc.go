// Package servers builds and runs the real etcd and kube-apiserver processes
// that reconkit's tests and examples use, with nothing installed by hand.
//
// The server binaries come from two separate modules under internal/tools
// (etcd; kube, whose two commands are kube-apiserver and
// kube-controller-manager), so their dependencies never reach the reconkit
// module. [Build] compiles them on first use into the user cache directory,
// under a file lock per module so that parallel test binaries build each
// one once, and reuses them afterwards. Asked for both Kubernetes servers,
// it builds them with one go build, which compiles k8s.io/kubernetes'
// shared packages once.
//
// Everything here binds to 127.0.0.1 on free ports and keeps its state in
// directories it owns. Processes are started with a parent-death signal on
// Linux, so a test binary that crashes does not leave servers behind.
//
// Package testenv wraps this package for tests; the example programs use it
// directly.
package servers
