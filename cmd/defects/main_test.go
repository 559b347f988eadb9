package main

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var buildFlag = flag.Bool("defects.build", false, "also copy the module, apply each patch and vet the packages it changes (slow)")

// The patches must keep applying to the code they break: a patch that no
// longer applies measures nothing. git apply --check changes nothing.
func TestPatchesApply(t *testing.T) {
	root := checkout(t)
	defects, err := loadDefects("testdata", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(defects) < 8 {
		t.Errorf("%d patches, want the 8 defects the fleet is measured on", len(defects))
	}
	for _, d := range defects {
		if err := d.check(t.Context(), root); err != nil {
			t.Error(err)
		}
	}
}

// With -defects.build, each patch applied to a copy of the module still
// compiles and vets: a patch that breaks the build measures nothing
// either.
func TestPatchesBuild(t *testing.T) {
	if !*buildFlag {
		t.Skip("copies the module and builds it once per patch: run with -defects.build")
	}
	root := checkout(t)
	defects, err := loadDefects("testdata", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defects {
		t.Run(d.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := copyTracked(t.Context(), root, dir); err != nil {
				t.Fatal(err)
			}
			if err := d.apply(t.Context(), dir); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), "go", append([]string{"vet"}, d.packages()...)...)
			cmd.Dir = dir
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go vet %v: %v\n%s", d.packages(), err, b)
			}
		})
	}
}

// checkout returns the root of the git checkout holding the test, or skips
// when there is none (a module copied without its history).
func checkout(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := gitRoot(t.Context(), ".")
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	return root
}

func TestParsePatch(t *testing.T) {
	text := "Defect: it spins.\nFixed by: abc123 (it waits)\nCaught by: ./x ^TestX$\nPackage: ./examples/other\nRun: ^TestOther$\n\n" +
		"diff --git a/x/y.go b/x/y.go\n--- a/x/y.go\n+++ b/x/y.go\n@@ -1 +1 @@\n-a\n+b\n" +
		"diff --git a/x/z.go b/x/z.go\n--- a/x/z.go\n+++ b/x/z.go\n@@ -1 +1 @@\n-a\n+b\n" +
		"diff --git a/w/v.go b/w/v.go\n--- a/w/v.go\n+++ b/w/v.go\n@@ -1 +1 @@\n-a\n+b\n"
	d, err := parsePatch("spin", text)
	if err != nil {
		t.Fatal(err)
	}
	want := defect{Name: "spin", Defect: "it spins.", FixedBy: "abc123 (it waits)", Caught: "./x ^TestX$",
		Package: "./examples/other", Run: "^TestOther$",
		files: []string{"x/y.go", "x/z.go", "w/v.go"}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("parsePatch = %+v, want %+v", d, want)
	}
	if got := d.packages(); !reflect.DeepEqual(got, []string{"./x", "./w"}) {
		t.Errorf("packages = %v", got)
	}
	for _, bad := range []string{
		"Fixed by: abc\nCaught by: ./x ^T$\n\ndiff --git a/x b/x\n+++ b/x\n", // no Defect
		"Defect: d\nFixed by: abc\n\ndiff --git a/x b/x\n+++ b/x\n",          // no Caught by
		"Defect: d\n\ndiff --git a/x b/x\n+++ b/x\n",                         // no Fixed by
		"Defect: d\nFixed by: f\n",                                           // no diff
		"Defect: d\nFixed by: f\ndiff --git a/x b/x\n",                       // no file
	} {
		if _, err := parsePatch("bad", bad); err == nil {
			t.Errorf("parsePatch(%q) accepted it", bad)
		}
	}
}

func TestParseOutput(t *testing.T) {
	out := `=== RUN   TestFleet/seed=1
    fleetsim.go:49: fleetsim-run seed=1 events=40 simulated=20m0s agent-hours=1.000 requests=2512 violated=false
=== RUN   TestFleet/seed=2
    fleetsim.go:49: fleetsim-run seed=2 events=12 simulated=3m2s agent-hours=0.100 requests=912 violated=true
    fleetsim.go:54: fleetsim: seed 2: request-budget at 3m1.5s: agent-1: 201 requests at one instant
        guarantee: DESIGN: after 30 s of the same answer
        run it again: go test -run <this test> -fleetsim.seed=2
    --- FAIL: TestFleet/seed=2 (1.00s)
`
	got := parseOutput(out)
	want := []outcome{
		{Seed: 1, Simulated: 20 * time.Minute},
		{Seed: 2, Simulated: 3*time.Minute + 2*time.Second, Invariant: "request-budget", At: 3*time.Minute + 1500*time.Millisecond,
			Detail: "agent-1: 201 requests at one instant"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseOutput = %+v\nwant %+v", got, want)
	}
}

func TestSeedRange(t *testing.T) {
	for _, tc := range []struct {
		in    string
		first uint64
		n     int
		ok    bool
	}{
		{"3", 3, 1, true}, {"1-20", 1, 20, true}, {"5-5", 5, 1, true},
		{"0", 0, 0, false}, {"5-4", 0, 0, false}, {"x", 0, 0, false}, {"1-", 0, 0, false},
	} {
		first, n, err := seedRange(tc.in)
		if (err == nil) != tc.ok || first != tc.first || n != tc.n {
			t.Errorf("seedRange(%q) = %d, %d, %v", tc.in, first, n, err)
		}
	}
}

// copyTracked copies what git tracks, as it is in the working tree, and
// nothing else.
func TestCopyTracked(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	src := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com",
			"GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
	}
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("a.go", "committed")
	write("d/b.go", "committed")
	git("add", ".")
	git("commit", "-q", "-m", "x")
	write("a.go", "edited")
	write("untracked.go", "no")
	dst := t.TempDir()
	if err := copyTracked(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.go": "edited", "d/b.go": "committed"} {
		if b, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "untracked.go")); err == nil {
		t.Error("an untracked file was copied")
	}
	if strings.Contains(dst, src) {
		t.Fatal("the copy is inside the checkout")
	}
}
