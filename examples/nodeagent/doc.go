// Command nodeagent runs a small cluster of node agents in one process, each
// wiring every reconkit package, and plays failure scenarios on it.
//
//	go run ./examples/nodeagent                       # run until Ctrl-C
//	go run ./examples/nodeagent --scenario failover   # or upgrade, bad-config, fence
//
// With no flags it needs nothing installed and no etcd for the agents: it
// starts a local kube-apiserver (built from internal/tools on the first
// run, with progress shown, then cached; it takes minutes to build once,
// and keeps its own storage in an etcd of its own), so no cluster of yours
// is touched. --kubeconfig points it at a real cluster of your own; it
// then behaves the same.
//
// --store says what the agents elect on and keep the version gate in. kube
// (the default): a Lease election (election/lease) and the gate's Lease
// store (versiongate/kubestore), on the Kubernetes API alone; the gate
// fences its status writes by the Lease term's token. etcd: an etcd
// election (election/etcd) and the gate's etcd store
// (versiongate/etcdstore), whose status writes carry the term's etcd
// guard, on a local etcd or, with --etcd, on yours. --kube memory runs on
// reconkit's in-memory Kubernetes API (kubefake), which starts at once,
// with --store etcd only. The load balancer it reconciles is always the
// in-memory engine of lbrecon/lbrecontest, behind a store that refuses
// stale fencing tokens.
//
// The Nodes it registers carry the NoSchedule taint
// reconkit.io/nodeagent=true, as virtual-kubelet's do, so that DaemonSets
// and the scheduler place nothing on them (--taint=false leaves it off).
//
// Each agent boots its configuration through checkpoint (assigned through
// a ConfigMap, with a trial and rollback to last-known-good), registers its
// Node and heartbeats it with nodestatus (reporting the ConfigOK
// condition), publishes its release and waits with versiongate.WaitReady,
// and campaigns on the election; the leader runs the version-gated
// reconcile, which converges the load balancer with lbrecon over the
// healthy Nodes (nodestatus.NodeHealth: Ready and VersionGateReady True,
// heartbeat Lease seen renewing; nodetargets.From): one reconciler per
// agent for its load balancer, built on its first term and kept across
// terms, each term's fencing token carried in the context of its calls.
//
// With --http ADDR it serves /metrics, the Prometheus metrics of every
// package of every agent (labelled name=<agent>) from one registry, and
// /healthz (package healthz, in the Kubernetes components' format): one
// check per agent, failing with the agent's failed checks, and
// /healthz/<agent> with that agent's four: its elector, its Node's
// heartbeat, its gate's release record and its configuration trial. Each agent records
// Kubernetes events (leadership, configuration trials and rollbacks, the
// version gate, registration) on its Node.
//
// The live view goes to standard output: on a terminal it is redrawn every
// second, otherwise one status line is printed per change. Logs go to
// standard error through logr (errors only by default; -v=1 for info,
// -v=2 for more). Every scenario ends with one line
//
//	VERDICT <scenario>: PASS|FAIL key=value ...
//
// and the exit status is 0 only for PASS (or a clean Ctrl-C without a
// scenario).
package main
