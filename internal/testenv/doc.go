// Package testenv gives tests a real etcd and a real kube-apiserver, built
// and started with nothing installed by hand.
//
// Every helper skips its test under go test -short, and stops and removes
// what it started in t.Cleanup. The first use on a machine builds the server
// binaries into the user cache directory ($RECONKIT_TESTENV_CACHE if set):
// etcd in about half a minute, then kube-apiserver and
// kube-controller-manager in one go build, which compiles what they share
// once (five to six minutes on two cores). Progress goes to standard error,
// and later runs reuse the binaries.
//
//	e := testenv.Etcd(t)                      // one member
//	e := testenv.Etcd(t, testenv.Members(3))  // a three-member cluster
//	cli := e.Client(t)
//	e.Members[0].Kill()                       // SIGKILL; Pause, Resume, Restart
//	p := testenv.Proxy(t, e.Members[0].ClientAddr())
//	p.Cut(); p.Restore(); p.SetDelay(d)
//	a := testenv.APIServer(t)
//	cs := kubernetes.NewForConfigOrDie(a.Config())
package testenv
