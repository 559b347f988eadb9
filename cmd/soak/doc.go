// Command soak runs many seeds of a fleet simulation and reports how much
// simulated agent time each CPU-minute buys.
//
// It builds the test binary of one package (a host's package whose test
// calls fleetsim.Test), runs it in -procs processes at once, each over its
// own range of seeds (-fleetsim.seed, -fleetsim.count), and reads the
// "fleetsim-run" line every run logs. The CPU time is the processes' own
// (user and system, from the operating system), the build excluded.
//
//	go run ./cmd/soak -pkg ./examples/outsider -run '^TestFleet$' -seeds 200
//
// It prints each failed seed with the command that runs it again, and the
// totals: runs, failures, simulated agent-hours, CPU-minutes, and
// agent-hours per CPU-minute. It exits 1 when a seed failed.
//
// With -baseline REV it first runs the same seeds on the package as it is
// at the git revision REV (extracted with git archive to a temporary
// directory), then on the working tree, and prints the two totals side by
// side, with the ratio of the two figures, so that a change's effect on speed is measured by one command:
//
//	go run ./cmd/soak -pkg ./examples/outsider -run '^TestFleetFive$' -seeds 4 -baseline main
package main
