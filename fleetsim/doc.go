// Package fleetsim runs a fleet of agents that a host builds on reconkit
// under a seeded nemesis, in one testing/synctest bubble, and checks the
// documented guarantees while the run goes on.
//
// A host hands Test (or Simulate, inside a bubble of its own) an [Agent]: a
// function that runs one agent until its context ends, as a host's main
// does. Each agent gets its own [Deps]: its own kubefake client of one
// shared apiserver, its own link to one shared lbrecontest provider (every
// write passing one lbrecon.Fence), its own checkpointtest.StrictFS, and
// its own clock. Hours of simulated time pass in seconds, since time in a
// bubble moves only when every goroutine waits. A host that wants the
// guarantees of its parts judged tells the world a little more: it wraps
// its checkpoint store with Deps.Checkpoints, calls Deps.Serving when its
// version gate lets it serve or stops it, runs Deps.Release, and names its
// Node (Config.Nodes).
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
// event, for a while. Slow reads and slow writes delay one agent's gets and
// lists, or its writes, by 100ms to 3s before the apiserver sees them
// (watches are not delayed). Operator edits delete a Lease, make a host's
// [Edit], delete a Service or change its type between LoadBalancer and
// ClusterIP, or delete a namespace of Config.Objects (its objects are
// deleted, creations in it answer 403 for a while, then the operator
// creates it and its objects again; the Namespace object itself is not
// modelled). Provider faults are lbrecontest's: 429 bursts, outages, failed
// creations, lost answers. A rolling upgrade stops one agent and starts it
// at the next of Config.Gate.Releases. Clock drift sets one agent's clock
// (Deps.Clock) to a rate within Nemesis.MaxDrift of simulated time (2% by
// default; see [DefaultMaxDrift]); only what the host gives that clock to
// drifts, and a timer keeps the rate it was set at. After Config.Duration
// every fault is undone (clock rates stay, being within what the packages
// document, and a rolling upgrade under way completes: every agent runs the
// highest release one reached), every agent runs, and the quiet period judges
// liveness.
//
// The world also plays the node lifecycle controller when Config.Nodes
// names the agents' Nodes: every 5 seconds it sets Ready to Unknown on a
// Node whose heartbeat Lease was not renewed within Nodes.Grace. No other
// controller runs (no namespace, garbage-collector or service controller).

// # Invariants, checked as the run goes
//
// Each [Invariant] names the guarantee it checks ([Invariant.Guarantee]);
// the first violation ends the run:
//   - [OneTerm]: a write reaching the fence with a term's token while a
//     write context of a lower term is still live (election's "at most one
//     term context live at any instant"). A term live when the nemesis
//     deletes a Lease (outside kube-node-lease) is not judged: election's
//     doc covers only its own protocol, and a deleted Lease hands the
//     election to the next candidate at once, the terms overlapping until
//     the holder learns of it (TestDeletedLeaseHandsOver); the fence still
//     orders them (FenceOrder);
//   - [FenceOrder]: a write passing the fence with a token lower than one
//     that passed before;
//   - [Converges]: by the end of the quiet period the provider holds what
//     Config.Converged describes, with no untagged object and no two tagged
//     objects of one kind and name. Converged is given each agent's latest
//     checkpoint record (Deps.Checkpoint), judged again as the fleet
//     changes, and the timeline names every agent whose assigned
//     configuration is refused: a configuration rolled back as a crash loop
//     because the nemesis crashed its agent within its trial stays refused
//     until the assignment changes, as checkpoint documents, and a host
//     whose agents then stay out of the load balancer expects them out;
//   - [Stops]: a Run that does not return within Config.StopTimeout of its
//     context's end, returns an error then, or leaves a goroutine behind
//     (found by a pprof label every goroutine of the run inherits);
//   - [Lives]: a Run that returns while its context is live;
//   - [RequestBudget]: an agent sending more than Budget.PerMinute requests
//     to the apiserver (counted at its client) or calls to the provider in
//     a minute, more than Budget.PerKind apiserver requests of one kind
//     (one verb on one resource, with one name or one set of selectors:
//     what one loop sends; a create or update is of the object it sends,
//     TestUpdatesOfTwoObjectsAreTwoKinds) in a minute, or more than Budget.AtOnce without
//     simulated time passing (a spinning loop, which would otherwise freeze
//     the bubble's clock) (DESIGN: "after 30 s of the same answer, at most
//     one request per second per agent, with jitter"; the default of 120 a
//     minute of one kind leaves room for a loop's first, faster retries,
//     and a loop that retries every 100ms exceeds it within 12 s:
//     TestFixedRetryBreaksBudget, TestBackedOffRetryWithinBudget; a fleet
//     whose loops fail for shorter spells sets it lower, as
//     examples/nodeagent's TestFleetRollout sets 90). Jitter itself is not
//     judged;
//   - [GoneRewatch]: a run watching a resource again, with the same
//     selectors, from a resourceVersion the apiserver already answered 410
//     Gone to in that run (DESIGN: "a 410 means one fresh read from a
//     resourceVersion the server can serve, never a loop"; client-go's
//     reflector lists again after a 410). An apiserver restart and a
//     bounded watch history (Config.Kube.WatchWindow, WatchHistory) make
//     410s;
//   - [LKGProven]: a checkpoint record (seen through Deps.Checkpoints) that
//     makes a configuration last-known-good less than
//     Config.CheckpointTrial after this run recorded the start of its trial,
//     or with no trial started in this run (checkpoint: "only a
//     configuration that passed its trial in one process ... becomes
//     last-known-good"); a host that confirms by hand turns it off. The
//     trial runs on the agent's clock, so the bound is the trial on a clock
//     DefaultMaxDrift fast (9m48s for 10 minutes): a drift beyond that
//     bound shortens a trial past it (examples/outsider and
//     examples/nodeagent TestFleetDriftBeyondBound: a 50% drift is caught, a
//     2% one passes);
//   - [NodeReady]: a Node still Ready Unknown Nodes.Within (30 seconds by
//     default) after its agent's client last reached the apiserver (its
//     start, or a healed partition), while the agent runs (nodestatus: the
//     Ready status is back within one retry wait of the heal). An agent
//     whose Node pings Deps.Ping (the backend health the world models:
//     it fails while the agent's provider link is cut) and stops its
//     heartbeats while that fails is not judged while the link is cut, and
//     gets Nodes.PingInterval more after the link's heal when that came
//     later (TestNodeReadyPinged). It judges Unknown only, which the
//     world's lifecycle writes, not a Ready False the agent reports
//     itself;
//   - [NoIncompatibleServing]: a write passing the fence, by an agent whose
//     run is at release R, while another agent serves (Deps.Serving) below
//     Gate.MinimumCompatible(R) (versiongate: a leader reconciles only once
//     no member node is below its minimum compatible release);
//   - [TermChurn]: a Lease outside kube-node-lease beginning more than
//     MaxTermsPerMinute terms (increments of its leaseTransitions, seen by
//     the world's own watch) within a minute (election/lease: a candidate
//     without Config.Coordinated clears a leftover preferred holder, so it
//     never yields at every renewal). [LeftoverPreferredHolder] is the
//     operator edit that leaves one.
//
// # What the nemesis does not model
//
// Faults outside this list are not made, so the guarantees they would
// test are not checked here (each package's own tests, and the real-server
// tests of internal/testenv, cover some of them):
//   - apiserver answers other than a partition's: no 429 (priority and
//     fairness), 500, 503, 504 or 401 from the apiserver (kubefake can
//     inject them: Server.Inject), no lost answer to a write that the
//     apiserver applied, and no time during which a restarting apiserver
//     answers nothing (Restart answers again at once);
//   - stale reads: the watch cache never lags the store (kubefake's
//     CacheLag and PauseCache are not driven), and there is one apiserver,
//     not several behind a load balancer with caches of their own;
//   - watches that end after their lifetime (WatchLifetime) unless the
//     host configures it, and one-way partitions (requests that arrive,
//     answers that do not);
//   - process pauses (a stopped or starved agent whose timers fire late)
//     and clock steps: a clock only drifts, continuously, and a timer keeps
//     the rate it was set at;
//   - disk faults other than a power loss (a full disk, EIO, a torn or
//     corrupt file), though checkpointtest.StrictFS can inject them;
//   - operator edits beyond those listed: no edit of a Lease's fields, a
//     Node deleted or tainted, an object grown past the apiserver's limits;
//     the Namespace object itself, the garbage collector, the namespace and
//     service controllers;
//   - provider faults that Config.Provider declares rather than the
//     nemesis schedules: lag and listings that go backwards are the
//     provider's configuration for the whole run.
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
// at the same simulated instants. What the agents do in between is not
// wholly: synctest makes time deterministic, not Go's scheduler, so
// goroutines that are runnable at one instant run in an order that varies
// from run to run (and select cases, map iterations and the agents' own
// jitter are random by design). The simulator cannot order goroutines
// (there is no hook for it short of a patched runtime); it keeps the
// agents' instants apart instead, so that fewer goroutines of different
// agents are runnable at once:
//   - each agent starts at its own instant within the first second of the
//     run, drawn from the seed, so that agents whose loops tick at the
//     same periods never tick at one instant, and the first election goes
//     to the agent the seed started first;
//   - each agent's watches see a change a delay of its own after it was
//     written (kubefake.Client.SetWatchDelay, under 10ms, drawn from the
//     seed), so that agents woken by one change (a Lease released) act one
//     after another, in an order the seed fixes;
//   - the nemesis draws its instants at nanosecond resolution, so that no
//     event shares an instant with an agent's timer;
//   - these draws come from streams of their own: they move no nemesis
//     draw;
//   - each loop of each run of each agent gets a random source of its own
//     (Deps.Rand), drawn from the seed, the agent's name, its Boot and the
//     loop's name, for the Rand fields of reconkit's Configs, so that the
//     agents' jitter (backoff's retries and renewals, election.Run's
//     pauses, the electors', the version gate's and its store's,
//     nodestatus's, configmapsource's, checkpoint's, lbrecon's retries
//     of provider calls) replays with the seed. The gate, its kubestore,
//     the Lease elector, nodestatus, checkpoint.Controller and each
//     lbrecon.Reconciler split the source they are given into one per
//     goroutine when they are built, so that goroutines of one agent that
//     wake at one instant do not take each other's draws. A host gives
//     each part its own loop name (examples/outsider, nodeagent and
//     ccmfleet do); a part given none draws from math/rand/v2's global
//     source, which no seed reaches.
//
// What remains is each agent's own concurrency: its goroutines that wake
// at one instant run in the scheduler's order, which the simulator does
// not reach. [ReplayRate] compares timelines with the entries of each
// instant taken as a set, agent logs left out, and random identities and
// provider ids (handed out in the order of creations made at one instant)
// masked. Measured with examples/outsider's TestFleetReplay (three
// agents, 10 minutes of faults and the quiet period, five runs of each of
// seeds 1, 2 and 3, -race; go test -race -count=1 -run
// '^TestFleetReplay$' -v ./examples/outsider/ -fleetsim.seed=N): agents
// that only wait on timers replay every time; the outsider agents replay
// in none of the four reruns of any seed. Before the agents drew from
// seeded sources, seeds 1, 2 and 3 parted at 36.7s, 2m50.6s and 0.6s.
// With seeded sources, one per goroutine, they part at
// 36.7s, 2m50.7s and 0.6s, each where one agent's goroutines ran in
// either order at one instant:
//   - seed 1: a watch answered 410 from resourceVersion 17 in one run and
//     14 in the other, the resourceVersion its ConfigMap listing got at
//     the agent's start, at the instant its other goroutines wrote its
//     Leases (kubefake's resourceVersions count every write, so the
//     listing's depends on how many of those came first);
//   - seed 2: the same, for a record watch (313 against 312) after an
//     apiserver restart;
//   - seed 3: the first leader's reconcile ran before or after its
//     checkpoint controller assigned the ConfigMap's settings at that
//     instant; when before, it found no settings and resigned its term,
//     and another agent led.
//
// Measured again once checkpoint.Controller and lbrecon drew from seeded
// sources too (same command, five runs of each seed): seed 2 replayed
// exactly in one of its four reruns, seeds 1 and 3 in none; the first
// parting of each seed's reruns came at 36.7s, 2m50.7s and 7m44.1s, each
// a watch answered 410 from a resourceVersion one or a few writes apart
// (seed 3's boot race did not come up in those runs).
//
// Between the two steps (seeded sources, but one per part, shared by its
// goroutines), seed 2 parted at 3m53s, where one agent's node record
// publication and node listing, retrying together after a partition,
// took each other's draws in either order; with one source per
// goroutine, two further runs of seed 2 made those 28 retries at the same
// instants. Where runs part is itself a draw of the scheduler: masking
// resourceVersions as well, two runs of seed 2 parted at 0.7s, at the
// same race as seed 3's.
//
// So a seed that failed replays the same faults at the same times and the
// same draws in each loop, not always the same order of one agent's
// goroutines at one instant, and so not always the same agent actions or
// the same failure. In practice a failure that a fault causes comes back
// at about the same instant (cmd/defects' versiongate-ready-backoff:
// seeds 1 to 3 at 5m0s, 3m17s and 6m18s in three runs, within half a
// second, measured before the sources were seeded), and one that needs
// two agents' timing to meet comes back less often:
// run it several times (cmd/soak -first N -seeds 1, or -fleetsim.seed=N
// with -count), and read the timeline, which names what happened.
//
// # Limits
//
//   - Slowing requests: client-go's fake clientset runs its reactors with
//     its lock held, and a request that waited with it would block the same
//     client's other requests on a mutex, which stops time in a bubble
//     (kubefake's Config.Latency has that problem for agents that send
//     concurrent requests through one client). The simulator's first
//     reactor of each client lets go of the lock while it waits on a timer
//     and takes it again before the next reactor runs. It relies on
//     Fake.Invokes holding that lock around the reaction chain, as client-go
//     does today. The wait comes before the request reaches the server: a
//     partition or crash that begins meanwhile fails it, as a request not
//     yet sent would.
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
//   - Speed: five examples/outsider agents make 1.2 to 1.7 times the
//     simulated agent-hours per CPU-minute they made at 2ef40fd, without
//     the race detector: 54, 79 and 68 against 46, 47 and 56 in three runs
//     of go run ./cmd/soak -pkg ./examples/outsider -run '^TestFleetFive$'
//     -seeds 4 -procs 2 -baseline 2ef40fd (4 runs of an hour each), and
//     90 against 64 with -seeds 8, on a shared two-core machine whose load
//     moved both figures by half between runs (the goal of 100 is not
//     reached). Of a run's CPU, kubefake's field manager takes about a
//     sixth (its comparison of the stored and the written object, and the
//     JSON of managedFields), the garbage collector about a sixth, and the
//     agents' own code most of the rest (nodestatus builds each status
//     patch through JSON); the simulator itself, its meters, timeline and
//     observers, a few percent. kubefake draws no random uids, so a run's
//     objects have the same uids from one rerun to the next. The CI seeds
//     of examples/outsider's TestFleet (three runs of
//     10 minutes of faults and the quiet period) take 43s of wall time and
//     16 CPU-seconds under -race on a shared two-core machine, those of
//     examples/nodeagent's (two runs) 27s and 20 CPU-seconds, build
//     included.
package fleetsim
