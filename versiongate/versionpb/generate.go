package versionpb

// Regenerate versionpb.pb.go with protoc-gen-go v1.36.12 and a pure-Go
// protobuf compiler; nothing needs installing by hand:
//
//	go generate ./versiongate/...
//
//go:generate go run -C ../../internal/tools/protogen . -I ../../../versiongate/versionpb -o ../../../versiongate/versionpb versionpb.proto
