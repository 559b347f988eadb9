package versionpb_test

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/reconkit/reconkit/versiongate/versionpb"
)

// A node's release record survives an encode and decode unchanged.
func Example() {
	rec := &versionpb.NodeRelease{
		NodeId:  "node-a",
		Version: &versionpb.Version{Release: &versionpb.Release{Major: 1, Minor: 4, Patch: 2}},
	}
	b, err := proto.Marshal(rec)
	if err != nil {
		fmt.Println(err)
		return
	}
	var got versionpb.NodeRelease
	if err := proto.Unmarshal(b, &got); err != nil {
		fmt.Println(err)
		return
	}
	r := got.GetVersion().GetRelease()
	fmt.Printf("%s runs %d.%d.%d\n", got.GetNodeId(), r.GetMajor(), r.GetMinor(), r.GetPatch())
	// Output: node-a runs 1.4.2
}
