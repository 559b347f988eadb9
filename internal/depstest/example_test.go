package depstest_test

import (
	"fmt"

	"github.com/reconkit/reconkit/internal/depstest"
)

// A pattern ending in "/" matches only below it; any other also matches
// itself, but never a longer name.
func ExampleMatch() {
	fmt.Println(depstest.Match("k8s.io/client-go/", "k8s.io/client-go/kubernetes"))
	fmt.Println(depstest.Match("google.golang.org/grpc", "google.golang.org/grpc/codes"))
	fmt.Println(depstest.Match("google.golang.org/grpc", "google.golang.org/grpcx"))
	// Output:
	// true
	// true
	// false
}
