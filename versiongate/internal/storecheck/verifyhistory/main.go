// Command verifyhistory checks one store history for linearizability
// against storecheck's model: it reads a storecheck.ChildRequest as JSON
// on its standard input and writes a storecheck.ChildResult. storecheck
// builds and runs it without the race detector when the tests run with it
// (see storecheck.Verify); it is not meant to be run by hand.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
)

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "verifyhistory: reading the request:", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(storecheck.Serve(in)); err != nil {
		fmt.Fprintln(os.Stderr, "verifyhistory: writing the answer:", err)
		os.Exit(1)
	}
}
