// Package fleetsim runs a fleet of agents that a host builds on reconkit
// under a seeded nemesis, in one testing/synctest bubble, and checks the
// documented guarantees while the run goes on.
//
// A host hands Test (or Simulate, inside a bubble of its own) an [Agent]: a
// function that runs one agent until its context ends, as a host's main
// does. Each agent gets its own [Deps]: its own kubefake client of one
// shared apiserver, its own link to one shared lbrecontest provider (every
// write passing one lbrecon.Fence), and its own checkpointtest.StrictFS.
// Hours of simulated time pass in seconds, since time in a bubble moves
// only when every goroutine waits.
//
//	func TestFleet(t *testing.T) {
//		fleetsim.Test(t, fleetsim.Config{
//			Agent: func(ctx context.Context, d fleetsim.Deps) error { return Run(ctx, d.Kube, d.Engine) },
//			Objects: []runtime.Object{settings}, Tag: "owner=me",
//		}, 1, 2, 3)
//	}
//
// # The nemesis
//
// From the seed the nemesis draws a schedule of events, one random source
// per [Kind] and one for the schedule, so that turning a kind off (weight 0,
// [Nemesis.Without]) shifts no other kind's draws. A crash ends an agent's
// context after cutting its client and provider link and freezing its disk,
// so that nothing it does on its way out reaches the world; then its disk
// loses what it had not synced (StrictFS.Crash), and a new run starts on
// that disk a while later with a new client. Partitions cut one agent's
// client (kubefake.Client.Cut) or provider link. An apiserver restart ends
// every watch; empty watches end each watch of one agent at once, with no
// event, for a while. Operator edits delete a Lease or make a host's [Edit].
// Provider faults are lbrecontest's: 429 bursts, outages, failed creations,
// lost answers. After Config.Duration every fault is undone, every agent
// runs, and the quiet period judges liveness.
//
// # Invariants, checked as the run goes
//
// Each [Invariant] names the guarantee it checks ([Invariant.Guarantee]);
// the first violation ends the run:
//   - [OneTerm]: a write reaching the fence with a term's token while a
//     write context of a lower term is still live (election's "at most one
//     term context live at any instant");
//   - [FenceOrder]: a write passing the fence with a token lower than one
//     that passed before;
//   - [Converges]: by the end of the quiet period the provider holds what
//     Config.Converged describes, with no untagged object and no two tagged
//     objects of one kind and name;
//   - [Stops]: a Run that does not return within Config.StopTimeout of its
//     context's end, returns an error then, or leaves a goroutine behind
//     (found by a pprof label every goroutine of the run inherits);
//   - [Lives]: a Run that returns while its context is live;
//   - [RequestBudget]: an agent sending more than Budget.PerMinute requests
//     to the apiserver (counted at its client) or calls to the provider in
//     a minute, or more than Budget.AtOnce without simulated time passing (a
//     spinning loop, which would otherwise freeze the bubble's clock).
//
// # Reproducing a failure
//
// A failed run reports its seed, the violation, and the timeline from two
// minutes before it to ten seconds after: every nemesis event, every agent
// start, stop and crash, every Lease holder change, every provider write
// with its token and every fence refusal, in simulated time. Test runs the
// seed given with -fleetsim.seed=N in place of its own.
//
// The nemesis's schedule is a function of the seed alone: the same events
// at the same simulated instants. What the agents do in between is not:
// synctest makes time deterministic, not Go's scheduler, so goroutines
// that are runnable at one instant run in an order that varies from run to
// run (and select cases and map iterations are random by design), and with
// it which candidate takes a Lease first, which write loses a conflict, and
// what follows. The simulator does nothing to order goroutines (there is no
// hook for it short of a patched runtime); it makes replays comparable
// instead: [ReplayRate] compares timelines with the entries of each instant
// taken as a set, agent logs left out and random identities masked.
// Measured: agents that only wait on timers replay every time; three
// examples/outsider agents replayed in none of four reruns of each of
// seeds 1, 2 and 3 (nor of seed 1 with GOMAXPROCS=1), parting at the first election (at 0s) for seeds 1 and
// 2 and at 1m8s for seed 3. So a seed that failed replays the same faults
// at the same times, not the same failure: run it several times (cmd/soak
// -first N -seeds 1, or -fleetsim.seed=N with -count), and read the
// timeline, which names what happened.
//
// # Limits
//
//   - Requests cannot be slowed: client-go's fake clientset holds its lock
//     while a reactor runs, so a request that waited inside it would block
//     the same client's other requests on a mutex, which stops time in a
//     bubble (kubefake's Config.Latency has the same problem for agents
//     that send concurrent requests through one client).
//   - apimachinery's utilruntime.HandleError rate limiter was stamped with
//     the wall clock when the process started; inside a bubble, whose clock
//     starts in 2000, its first call would sleep for decades. Config.Start
//     moves the bubble's clock to today first (Test does so). Runs one after
//     another in one process still share its stamp: a call in a later run
//     can sleep as long as the earlier run's simulated time went past its
//     start. Agents whose code calls HandleError (client-go informers) need
//     runs short enough for that, or a process per run.
//   - Every run keeps its whole timeline in memory.
//   - A goroutine cannot be killed: an agent whose Run never returns is
//     reported (Stops), and then the bubble, left with a goroutine blocked
//     for ever, ends the test with synctest's deadlock panic and the stacks.
//   - Speed: five examples/outsider agents make 6 to 7 simulated
//     agent-hours per CPU-minute without the race detector (cmd/soak, two
//     soaks of 4 runs of an hour each), far from 100. About 60% of the CPU goes to client-go's
//     field-managed object tracker under kubefake, which builds a REST
//     mapper on every Update.
package fleetsim
