package servers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
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
