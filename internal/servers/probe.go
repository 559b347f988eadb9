package servers

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// probe GETs url with client, sending token as a bearer token when it is
// not empty, and returns the answer's first 4 KiB. A status other than 200
// is an error naming what (readyz, healthz, health) was asked.
func probe(ctx context.Context, client *http.Client, what, url, token string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("%s: %s: %s", what, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// probeOK is probe for the Kubernetes health endpoints, which answer "ok".
func probeOK(ctx context.Context, client *http.Client, what, url, token string) error {
	body, err := probe(ctx, client, what, url, token)
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(string(body)); got != "ok" {
		return fmt.Errorf("%s: %s", what, got)
	}
	return nil
}

// startProbed starts the server name unless *proc still runs (mu guards
// *proc), then waits up to timeout until its HTTPS endpoint url answers
// 200. The Kubernetes components serve a self-signed certificate, so it is
// not verified.
func startProbed(ctx context.Context, mu *sync.Mutex, proc **process, name, bin string, args []string, log *logBuffer,
	timeout time.Duration, what, url, token string) error {
	mu.Lock()
	if *proc != nil && !(*proc).exited() {
		mu.Unlock()
		return fmt.Errorf("servers: %s is already running", name)
	}
	p, err := startProcess(name, bin, args, log)
	if err != nil {
		mu.Unlock()
		return err
	}
	*proc = p
	mu.Unlock()

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	return p.waitUntil(ctx, timeout, func(ctx context.Context) error {
		return probeOK(ctx, client, what, url, token)
	})
}
