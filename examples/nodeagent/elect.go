package main

// electionPrefix is the election's key prefix, under the run's prefix. Each
// agent campaigns there with an etcd.Elector, which is the version gate's
// Candidate as it is; the gate resigns a term only after its reconcile
// returned.
const electionPrefix = "election"
