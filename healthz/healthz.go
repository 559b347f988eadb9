package healthz

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Checker reports whether something is healthy: nil when it is, an error
// saying why not otherwise. It has the shape of controller-runtime's
// healthz.Checker.
type Checker func(req *http.Request) error

// Ping is a Checker that always passes: the process answers HTTP.
func Ping(*http.Request) error { return nil }

// Check is a named Checker.
type Check struct {
	// Name is how the check appears in the output and in ?exclude=. It
	// must be non-empty, unique within a Handler, and free of spaces,
	// slashes and commas.
	Name string
	// Checker runs the check. Required.
	Checker Checker
}

// ErrInvalidCheck is wrapped by the error of New for a check without a
// valid name or without a Checker, or a name used twice.
var ErrInvalidCheck = errors.New("healthz: invalid check")

// Handler serves a list of named checks; see the package documentation
// for the format. Create it with New.
type Handler struct {
	checks []Check
}

// New returns a Handler over checks, run in the order given. It returns an
// error wrapping ErrInvalidCheck for an empty or duplicate name, a name
// with a space, slash or comma, or a nil Checker.
func New(checks ...Check) (*Handler, error) {
	var errs []error
	seen := map[string]bool{}
	for i, c := range checks {
		switch {
		case c.Name == "" || strings.ContainsAny(c.Name, " \t\r\n/,"):
			errs = append(errs, fmt.Errorf("%w: check %d has name %q", ErrInvalidCheck, i, c.Name))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("%w: name %q used twice", ErrInvalidCheck, c.Name))
		}
		seen[c.Name] = true
		if c.Checker == nil {
			errs = append(errs, fmt.Errorf("%w: check %q has no Checker", ErrInvalidCheck, c.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Handler{checks: slices.Clone(checks)}, nil
}

// Check runs every check and returns nil when all pass, or the failures
// joined, each prefixed with its check's name. It is itself a Checker, so
// a Handler can be one check of another.
func (h *Handler) Check(req *http.Request) error {
	var errs []error
	for _, c := range h.checks {
		if err := c.Checker(req); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

var _ Checker = (*Handler)(nil).Check

// ServeHTTP runs the checks not excluded by ?exclude= and writes the
// result: 200 "ok" (or every check's line with ?verbose) when all pass,
// 500 with every check's line when any fails.
func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	serve(w, req, h.checks, true)
}

var _ http.Handler = (*Handler)(nil)

// ErrInvalidPath is wrapped by the error of Install for a path it cannot
// serve, or one that mux already serves.
var ErrInvalidPath = errors.New("healthz: invalid path")

// Install serves h on mux, for every method as controller-runtime's
// healthz does: path (for example "/healthz") and path + "/" run every
// check, as ServeHTTP does, and path/<name> runs the check called name
// alone, in the same format (?verbose works), answering 404 for a name no
// check has. A request for one check runs it whatever ?exclude= says, as
// controller-runtime's and the Kubernetes components' do: a probe that
// names a check asks for that check, and is never told "ok" for one that
// fails. path must begin with a slash and not end with one. Install
// returns an error wrapping ErrInvalidPath for a path it cannot use or one
// that conflicts with a pattern mux already has, in which case it may have
// registered some of its three patterns.
func (h *Handler) Install(mux *http.ServeMux, path string) (err error) {
	if !strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.ContainsAny(path, "{} \t\r\n") {
		return fmt.Errorf("%w: %q must begin with a slash, not end with one, and hold no braces or spaces", ErrInvalidPath, path)
	}
	defer func() {
		if r := recover(); r != nil { // ServeMux panics on a conflicting pattern
			err = fmt.Errorf("%w: %v", ErrInvalidPath, r)
		}
	}()
	mux.Handle(path, h)
	mux.Handle(path+"/{$}", h)
	mux.HandleFunc(path+"/{check}", h.serveOne)
	return nil
}

// serveOne serves the check named by the request's {check} path value,
// ignoring ?exclude=.
func (h *Handler) serveOne(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("check")
	for _, c := range h.checks {
		if c.Name == name {
			serve(w, req, []Check{c}, false)
			return
		}
	}
	http.Error(w, fmt.Sprintf("healthz: no check named %q", name), http.StatusNotFound)
}

// serve runs checks and writes the result; see ServeHTTP. With exclusive
// false it ignores ?exclude=.
func serve(w http.ResponseWriter, req *http.Request, checks []Check, exclusive bool) {
	q := req.URL.Query()
	_, verbose := q["verbose"]
	excluded := map[string]bool{}
	if !exclusive {
		q.Del("exclude")
	}
	for _, v := range q["exclude"] {
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				excluded[n] = true
			}
		}
	}
	var b strings.Builder
	failed := false
	for _, c := range checks {
		if excluded[c.Name] {
			fmt.Fprintf(&b, "[+]%s excluded: ok\n", c.Name)
			delete(excluded, c.Name)
			continue
		}
		if err := c.Checker(req); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %s\n", c.Name, oneLine(err.Error()))
			continue
		}
		fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
	}
	if len(excluded) > 0 {
		var names []string
		for n := range excluded {
			names = append(names, fmt.Sprintf("%q", n))
		}
		slices.Sort(names)
		fmt.Fprintf(&b, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch {
	case failed:
		w.WriteHeader(http.StatusInternalServerError)
		b.WriteString("healthz check failed\n")
		_, _ = fmt.Fprint(w, b.String())
	case verbose:
		b.WriteString("healthz check passed\n")
		_, _ = fmt.Fprint(w, b.String())
	default:
		_, _ = fmt.Fprint(w, "ok")
	}
}

// oneLine keeps a reason on its check's line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
