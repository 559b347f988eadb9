package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
	"testing"
	"testing/synctest"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// answers are the persistent answers the fake mode gives every request.
var answers = []struct {
	name  string
	fault func(*kubefake.Server, *kubefake.Client)
}{
	{"410", every(kubefake.Fail(apierrors.NewResourceExpired("too old resource version")))},
	{"403", every(kubefake.Fail(apierrors.NewForbidden(schema.GroupResource{Resource: "leases"}, "x", errors.New("RBAC: access denied"))))},
	{"404", every(func(a k8stesting.Action) error { return apierrors.NewNotFound(a.GetResource().GroupResource(), "x") })},
	{"409", every(kubefake.Conflict())},
	{"422", every(kubefake.Fail(apierrors.NewInvalid(schema.GroupKind{Kind: "Lease"}, "x",
		field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "invalid")})))},
	{"429 (Retry-After 1)", every(kubefake.TooManyRequests(1))},
	{"500", every(kubefake.InternalError())},
	{"503", every(kubefake.Unavailable())},
	{"watch ends at once", func(_ *kubefake.Server, c *kubefake.Client) {
		c.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
			w := watch.NewFake()
			w.Stop()
			return true, w, nil
		})
	}},
	{"refused", func(_ *kubefake.Server, c *kubefake.Client) { c.Cut() }},
}

func every(a kubefake.Answer) func(*kubefake.Server, *kubefake.Client) {
	return func(s *kubefake.Server, _ *kubefake.Client) { s.Inject(kubefake.Fault{Answer: a}) }
}

// fakeMode measures, in a synctest bubble on kubefake, loops of other
// packages under each persistent answer: requests per second from 30 s to
// 90 s. These are measurements of the code as it is, not tests.
func fakeMode() {
	match := func(pat, str string) (bool, error) { return regexp.MatchString(pat, str) }
	testing.Main(match, []testing.InternalTest{{Name: "Fake", F: func(t *testing.T) {
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(w, "loop\tanswer\trequests/s from 30 s to 90 s\t\n")
		for _, a := range answers {
			var rate float64
			var won bool
			synctest.Test(t, func(t *testing.T) { rate, won = campaignRate(t, a.fault) })
			note := ""
			if won {
				note = " (won the Lease: only watches fail; a leader renewing)"
			}
			fmt.Fprintf(w, "election/lease Campaign (defaults)\t%s\t%.2f%s\t\n", a.name, rate, note)
		}
		for _, rejoin := range []bool{false, true} {
			name := "versiongate on kubestore, one ready node leading (every loop)"
			if rejoin {
				name += ", RejoinAfterRecordLoss"
			}
			for _, a := range answers {
				var rate float64
				var note string
				synctest.Test(t, func(t *testing.T) { rate, note = gateRate(t, a.fault, rejoin) })
				fmt.Fprintf(w, "%s\t%s\t%.2f%s\t\n", name, a.name, rate, note)
			}
		}
		_ = w.Flush()
	}}}, nil, nil)
}

// campaignRate runs one election/lease candidate's Campaign with default
// settings against a server that gives answer to every request.
func campaignRate(t *testing.T, fault func(*kubefake.Server, *kubefake.Client)) (rate float64, won bool) {
	srv := kubefake.Config{}.NewServer()
	cl := srv.NewClient()
	var mu sync.Mutex
	var at []time.Time
	record := func() {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
	}
	cl.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) { record(); return false, nil, nil })
	cl.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) { record(); return false, nil, nil })
	fault(srv, cl)
	e, err := lease.New(lease.Config{Client: cl, Namespace: "kube-system", Name: "bench", Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if l, err := e.Campaign(ctx); err == nil {
		won = true
		<-ctx.Done() // measure the term's renewals too
		_ = l.Resign(context.Background())
	}
	synctest.Wait()
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, a := range at {
		if d := a.Sub(start); d >= 30*time.Second && d < 90*time.Second {
			n++
		}
	}
	return float64(n) / 60, won
}

// gateRate runs one versiongate node on kubestore and an election/lease
// candidate, with default settings, until it is ready and its leader's
// start is done, then gives answer to every request of its client, and
// counts what every loop of the gate sends (keep-alive, leader, watches).
func gateRate(t *testing.T, fault func(*kubefake.Server, *kubefake.Client), rejoin bool) (rate float64, note string) {
	srv := kubefake.Config{}.NewServer()
	cl := srv.NewClient()
	var mu sync.Mutex
	var at []time.Time
	record := func() {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
	}
	cl.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) { record(); return false, nil, nil })
	cl.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) { record(); return false, nil, nil })
	store, err := kubestore.New(kubestore.Config{Client: cl, Namespace: "agents", Gate: "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	elector, err := lease.New(lease.Config{Client: cl, Namespace: "agents", Name: "fleet-leader", Identity: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	version, _ := versiongate.ParseVersion("1.4.0")
	gate, err := versiongate.New(versiongate.Config{
		Store: store, NodeID: "node-a", Version: version,
		MinimumCompatibleRelease: versiongate.Release{Major: 1, Minor: 3},
		Candidate:                elector,
		Reconcile:                func(context.Context, versiongate.Term) error { return nil },
		RejoinAfterRecordLoss:    rejoin,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gate.Run(ctx) }()
	if err := gate.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for gate.Phase() != versiongate.PhaseDone {
		<-gate.PhaseChanged()
	}
	synctest.Wait()
	fault(srv, cl)
	start := time.Now()
	timer := time.NewTimer(90 * time.Second) // the bubble's clock
	select {
	case err := <-done:
		note = fmt.Sprintf(" (Run returned after %v: %v)", time.Since(start).Round(100*time.Millisecond), err)
		<-timer.C
	case <-timer.C:
		cancel()
		<-done
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, a := range at {
		if d := a.Sub(start); d >= 30*time.Second && d < 90*time.Second {
			n++
		}
	}
	return float64(n) / 60, note
}
