package kubefake_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
)

// With ActionHistory, a client keeps the newest ActionHistory requests at
// least and twice that at most, whatever it sent, watches included;
// Requests still counts them all. Without it, every request is kept, as
// client-go's fake keeps them.
func TestActionHistoryBoundsActions(t *testing.T) {
	ctx := context.Background()
	send := func(c *kubefake.Client, from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if i%10 == 9 {
				w, err := c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				w.Stop()
				continue
			}
			_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprint("cm-", i), metav1.GetOptions{})
			if err == nil {
				t.Fatal("a get of a missing ConfigMap succeeded")
			}
		}
	}
	c := kubefake.Config{ActionHistory: 25}.NewServer().NewClient()
	for sent := 1; sent <= 150; sent++ {
		send(c, sent, 1)
		got := c.Actions()
		if want := min(sent, 25); len(got) < want || len(got) > 50 {
			t.Fatalf("after %d requests Actions holds %d, want %d to 50", sent, len(got), want)
		}
	}
	got := c.Actions()
	if a, ok := got[len(got)-1].(k8stesting.GetAction); !ok || a.GetName() != "cm-150" {
		t.Errorf("the newest action kept is %#v, want the last get", got[len(got)-1])
	}
	if n := c.Requests().Total(); n != 150 {
		t.Errorf("Requests counts %d, want 150", n)
	}

	all := kubefake.Config{}.NewServer().NewClient()
	send(all, 0, 300)
	if n := len(all.Actions()); n != 300 {
		t.Errorf("without ActionHistory Actions holds %d of 300 requests", n)
	}
}
