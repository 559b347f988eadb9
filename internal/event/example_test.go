package event_test

import (
	"context"
	"fmt"

	"github.com/reconkit/reconkit/internal/event"
)

// A watcher that falls behind skips to the newest value: it sees state,
// not every change.
func Example() {
	var v event.Value[string]
	w := v.Watch()
	defer w.Close()

	v.Set("pending")
	v.Set("ready") // the watcher has not read "pending" yet
	got, _ := w.Get(context.Background())
	fmt.Println(got)

	w.Close()
	_, err := w.Get(context.Background())
	fmt.Println(err)
	// Output:
	// ready
	// event: watcher closed
}
