package depstest

import (
	"os/exec"
	"strings"
	"testing"
)

// Module is the import path of the reconkit module; a Rule's Package is
// relative to it.
const Module = "github.com/reconkit/reconkit"

// Rule says what one package must not compile.
type Rule struct {
	// Package is the import path relative to Module ("election/lease";
	// empty for the module's root package).
	Package string
	// Forbidden are patterns no dependency of Package may match.
	Forbidden []string
	// Allowed are patterns that exempt a dependency that a Forbidden one
	// matches ("k8s.io/utils/clock" under a forbidden "k8s.io/").
	Allowed []string
	// StandardOnly forbids every dependency outside the standard library
	// (one whose first path element has a dot), Allowed ones aside.
	StandardOnly bool
}

// Check lists the dependencies of every rule's package with one go list
// call and, in a subtest per rule, fails for each dependency that a
// Forbidden pattern matches and no Allowed one does. It skips t under
// -short and when there is no go command, and fails it when go list
// fails or lists no dependency for a package.
func Check(t *testing.T, rules ...Rule) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go list; skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	args := []string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}
	for _, r := range rules {
		args = append(args, importPath(r.Package))
	}
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		var stderr []byte
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = exit.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	deps := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	for _, r := range rules {
		pkg := importPath(r.Package)
		name := strings.ReplaceAll(r.Package, "/", "_")
		if name == "" {
			name = "root"
		}
		t.Run(name, func(t *testing.T) {
			list := deps[pkg]
			if len(list) == 0 {
				t.Fatalf("go list found no dependencies of %s", pkg)
			}
			for _, dep := range violations(list, r) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		})
	}
}

func importPath(rel string) string {
	if rel == "" {
		return Module
	}
	return Module + "/" + rel
}

// violations are the dependencies in deps that r forbids.
func violations(deps []string, r Rule) []string {
	var bad []string
	for _, dep := range deps {
		forbidden := matchAny(dep, r.Forbidden) || (r.StandardOnly && !standard(dep))
		if forbidden && !matchAny(dep, r.Allowed) {
			bad = append(bad, dep)
		}
	}
	return bad
}

// standard reports whether an import path is in the standard library: its
// first element has no dot, as the go command decides.
func standard(dep string) bool {
	first, _, _ := strings.Cut(dep, "/")
	return !strings.Contains(first, ".")
}

func matchAny(dep string, patterns []string) bool {
	for _, p := range patterns {
		if Match(p, dep) {
			return true
		}
	}
	return false
}

// Match reports whether the import path dep matches pattern (see the
// package documentation).
func Match(pattern, dep string) bool {
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(dep, pattern)
	}
	return dep == pattern || strings.HasPrefix(dep, pattern+"/")
}
