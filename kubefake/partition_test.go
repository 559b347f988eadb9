package kubefake_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/kubefake"
)

// closed waits, up to a deadline, for the watch's result channel to close,
// draining what it still delivers.
func closed(t *testing.T, w watch.Interface) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch still open after 10s")
		}
	}
}

func refusedErr(t *testing.T, what string, err error) {
	t.Helper()
	var ue *url.Error
	if !errors.As(err, &ue) || !utilnet.IsConnectionRefused(err) {
		t.Fatalf("%s while cut: %v (%T), want a *url.Error with ECONNREFUSED", what, err, err)
	}
	if apierrors.ReasonForError(err) != metav1.StatusReasonUnknown {
		t.Fatalf("%s while cut: %v has a Status; a refused connection has none", what, err)
	}
}

// Two clients share one server; cutting one refuses its requests and ends
// its watches, and leaves the other alone.
func TestCutClientIsRefusedOthersAreNot(t *testing.T) {
	srv := kubefake.Config{}.NewServer(cm("a", nil))
	a, b := srv.NewClient(), srv.NewClient()
	ctx := context.Background()

	got, err := b.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("second client reads the shared store: %v", err)
	}
	wa, err := a.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: got.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Stop()
	wb, err := b.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: got.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Stop()

	a.Cut()
	closed(t, wa)
	_, err = a.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
	refusedErr(t, "get", err)
	_, err = a.CoreV1().ConfigMaps(ns).Create(ctx, cm("from-a", nil), metav1.CreateOptions{})
	refusedErr(t, "create", err)
	_, err = a.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	refusedErr(t, "watch", err)
	if _, err := b.CoreV1().ConfigMaps(ns).Get(ctx, "from-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a create refused by a cut was stored: %v", err)
	}

	// The other client still writes, and its watch sees it.
	if _, err := b.CoreV1().ConfigMaps(ns).Create(ctx, cm("from-b", nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("uncut client: %v", err)
	}
	if ev := nextEvent(t, wb); ev.Type != watch.Added {
		t.Fatalf("uncut watch got %s, want ADDED", ev.Type)
	}

	a.Heal()
	if _, err := a.CoreV1().ConfigMaps(ns).Get(ctx, "from-b", metav1.GetOptions{}); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}
