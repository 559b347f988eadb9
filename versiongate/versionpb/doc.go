// Package versionpb holds the protobuf messages versiongate stores in etcd:
// the reconciler status and the per-node release record.
//
// The Go code is generated from versionpb.proto and committed; regenerate
// it with `go generate ./versiongate/...` (see generate.go), which compiles
// the schema with a pure-Go compiler and protoc-gen-go pinned to the
// protobuf runtime this module uses. A test checks that regeneration
// reproduces the committed file byte for byte. The wire format is the
// compatibility contract between releases: fields are only ever added.
package versionpb
