// Package etcdfault makes a real etcd answer one client's every request the
// same way, for the request-budget tests of the packages that loop on
// etcd: an agent's client talks to etcd through a proxy of its own, gRPC
// interceptors answer its requests with a status once armed (the etcd
// client's own retries run outside them, so they see every request on the
// wire), a closed proxy refuses its connections, and a Watcher wrapper
// ends its watches at once or answers them compacted. Each request is
// counted under the name a Classify gives it, stamped with a fake clock.
//
//	a, cli := etcdfault.New(t, srv, clk, ans, 1, etcdfault.Classify{...})
//	// start the loops on cli, let them settle
//	a.Arm()
//	// step clk
//	reqs := a.Requests(30*time.Second, 60*time.Second)
//
// A test of several agents on one clock builds them with a Group, which
// arms them together, steps the clock (Step, with a real StepPause after
// each) and disarms them when the test ends; Instants, PerKind and Rates
// read the counted requests:
//
//	t.Cleanup(func() { cancel(); wg.Wait() }) // before NewGroup
//	g := etcdfault.NewGroup(t, clk)
//	a, cli := g.New(t, srv, ans, 1, classify)
//	// start the loops on cli, let them settle
//	g.Run(ctx, 90*time.Second)
//	t.Logf("%s", etcdfault.Rates(etcdfault.PerKind(a.Requests(30*time.Second, 90*time.Second)), time.Minute))
package etcdfault
