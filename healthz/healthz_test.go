package healthz_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/healthz"
)

func serve(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code, rec.Body.String()
}

func TestHandler(t *testing.T) {
	broken := errors.New("lease not renewed\nfor 2m")
	h, err := healthz.New(
		healthz.Check{Name: "ping", Checker: healthz.Ping},
		healthz.Check{Name: "heartbeat", Checker: func(*http.Request) error { return broken }},
		healthz.Check{Name: "gate", Checker: func(*http.Request) error { return nil }},
	)
	require.NoError(t, err)
	for _, tc := range []struct {
		target string
		code   int
		body   string
	}{
		{"/healthz", 500, "[+]ping ok\n[-]heartbeat failed: lease not renewed for 2m\n[+]gate ok\nhealthz check failed\n"},
		{"/healthz?verbose", 500, "[+]ping ok\n[-]heartbeat failed: lease not renewed for 2m\n[+]gate ok\nhealthz check failed\n"},
		{"/healthz?exclude=heartbeat", 200, "ok"},
		{"/healthz?exclude=heartbeat&verbose", 200, "[+]ping ok\n[+]heartbeat excluded: ok\n[+]gate ok\nhealthz check passed\n"},
		{"/healthz?exclude=heartbeat,nope&exclude=other&verbose=1", 200,
			"[+]ping ok\n[+]heartbeat excluded: ok\n[+]gate ok\nwarn: some health checks cannot be excluded: no matches for \"nope\",\"other\"\nhealthz check passed\n"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			code, body := serve(t, h, tc.target)
			require.Equal(t, tc.code, code)
			require.Equal(t, tc.body, body)
		})
	}
	err = h.Check(nil)
	require.ErrorIs(t, err, broken)
	require.ErrorContains(t, err, "heartbeat: lease not renewed")
}

func TestNewRejects(t *testing.T) {
	ok := healthz.Checker(healthz.Ping)
	for name, checks := range map[string][]healthz.Check{
		"empty name":  {{Name: "", Checker: ok}},
		"slash":       {{Name: "a/b", Checker: ok}},
		"space":       {{Name: "a b", Checker: ok}},
		"comma":       {{Name: "a,b", Checker: ok}},
		"duplicate":   {{Name: "a", Checker: ok}, {Name: "a", Checker: ok}},
		"nil checker": {{Name: "a"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := healthz.New(checks...)
			require.ErrorIs(t, err, healthz.ErrInvalidCheck)
		})
	}
	h, err := healthz.New()
	require.NoError(t, err, "no checks: always ok")
	code, body := serve(t, h, "/healthz")
	require.Equal(t, 200, code)
	require.Equal(t, "ok", body)
}

func TestInstall(t *testing.T) {
	broken := errors.New("lease not renewed")
	h, err := healthz.New(
		healthz.Check{Name: "ping", Checker: healthz.Ping},
		healthz.Check{Name: "heartbeat", Checker: func(*http.Request) error { return broken }},
	)
	require.NoError(t, err)
	mux := http.NewServeMux()
	require.NoError(t, h.Install(mux, "/healthz"))
	for _, tc := range []struct {
		target string
		code   int
		body   string
	}{
		{"/healthz", 500, "[+]ping ok\n[-]heartbeat failed: lease not renewed\nhealthz check failed\n"},
		{"/healthz?exclude=heartbeat", 200, "ok"},
		{"/healthz/ping", 200, "ok"},
		{"/healthz/ping?verbose", 200, "[+]ping ok\nhealthz check passed\n"},
		{"/healthz/heartbeat", 500, "[-]heartbeat failed: lease not renewed\nhealthz check failed\n"},
		{"/healthz/nope", 404, "healthz: no check named \"nope\"\n"},
		{"/healthz/ping/more", 404, "404 page not found\n"},
		// A request for one check runs it: excluding it answers no "ok".
		{"/healthz/heartbeat?exclude=heartbeat", 500, "[-]heartbeat failed: lease not renewed\nhealthz check failed\n"},
		{"/healthz/ping?exclude=ping&verbose", 200, "[+]ping ok\nhealthz check passed\n"},
		// The path with a slash is the path, as controller-runtime serves it.
		{"/healthz/", 500, "[+]ping ok\n[-]heartbeat failed: lease not renewed\nhealthz check failed\n"},
		{"/healthz/?exclude=heartbeat", 200, "ok"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			code, body := serve(t, mux, tc.target)
			require.Equal(t, tc.code, code)
			require.Equal(t, tc.body, body)
		})
	}
	// Every method is served, as controller-runtime's healthz does.
	for _, method := range []string{http.MethodPost, http.MethodHead, http.MethodPut} {
		for target, code := range map[string]int{"/healthz/ping": 200, "/healthz/heartbeat": 500, "/healthz": 500, "/healthz/": 500} {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
			require.Equal(t, code, rec.Code, "%s %s", method, target)
		}
	}

	for _, bad := range []string{"", "healthz", "/healthz/", "/{x}", "/a b"} {
		require.ErrorIs(t, h.Install(http.NewServeMux(), bad), healthz.ErrInvalidPath, "path %q", bad)
	}
	require.ErrorIs(t, h.Install(mux, "/healthz"), healthz.ErrInvalidPath, "a path mux already serves")
}
