// Package depstest checks which packages a reconkit package compiles. The
// splits that keep a host from compiling what it does not use (etcd's
// client, gRPC, client-go, another feature package) are promises; a test
// holds each with go list.
//
//	depstest.Check(t,
//		depstest.Rule{Package: "election/lease", Forbidden: []string{"go.etcd.io/", "google.golang.org/grpc"}},
//	)
//
// A pattern matches by import path: one ending in "/" matches every
// package under it ("k8s.io/client-go/"); any other matches that package
// and every package under it ("google.golang.org/grpc" matches
// google.golang.org/grpc/codes, not google.golang.org/grpcx).
package depstest
