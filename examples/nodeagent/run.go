package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"

	"github.com/reconkit/reconkit/versiongate"
)

// errFailed is returned when a scenario's verdict is FAIL.
var errFailed = errors.New("scenario failed")

// run sets everything up, starts the agents and the view, plays the
// scenario (or waits for ctx to end), and tears everything down.
func run(ctx context.Context, opts options, stdout, stderr io.Writer) (err error) {
	log := newLogger(stderr, opts.verbosity)
	ctx = logr.NewContext(ctx, log)
	version, err := versiongate.ParseVersion(opts.release)
	if err != nil {
		return fmt.Errorf("--release: %w", err)
	}
	p := &printer{w: stdout, tty: isTerminal(stdout), start: time.Now()}

	e, err := newEnv(ctx, opts, log, p.say)
	if err != nil {
		return err
	}
	defer e.close()

	// The HTTP server runs with the agents: its failure ends the run, and
	// it is shut down before the agents stop.
	g, ctx := errgroup.WithContext(ctx)
	httpCtx, stopHTTP := context.WithCancel(ctx)
	defer func() {
		stopHTTP()
		if werr := g.Wait(); werr != nil && err == nil {
			err = werr
		}
	}()
	if opts.http != "" {
		ln, err := e.ops.listen(ctx, opts.http)
		if err != nil {
			return err
		}
		p.say("setup: serving /metrics and /healthz on http://%s", ln.Addr())
		g.Go(func() error { return e.ops.serve(httpCtx, ln) })
	}

	v := newView(e, p)
	viewCtx, stopView := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { v.run(viewCtx) })
	p.setLive(p.tty)
	defer func() {
		stopView()
		wg.Wait()
		p.setLive(false)
	}()

	for i := 1; i <= opts.agents; i++ {
		if _, err := e.startAgent(ctx, i, version); err != nil {
			return err
		}
	}
	p.say("started %d agents at release %s", opts.agents, version)

	if opts.scenario == "" {
		p.say("running until Ctrl-C (try --scenario failover, upgrade, bad-config or fence)")
		<-ctx.Done()
		p.say("interrupted: stopping every agent")
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, opts.deadline)
	defer cancel()
	sc := &scenario{env: e, view: v, p: p, start: time.Now()}
	var verdict string
	switch opts.scenario {
	case "failover":
		verdict, err = sc.failover(sctx)
	case "upgrade":
		verdict, err = sc.upgrade(sctx)
	case "bad-config":
		verdict, err = sc.badConfig(sctx)
	case "fence":
		verdict, err = sc.fence(sctx)
	}
	stopView()
	wg.Wait()
	p.setLive(false)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		p.verdict(fmt.Sprintf("VERDICT %s: FAIL after=%.1fs error=%q", opts.scenario, time.Since(sc.start).Seconds(), err.Error()))
		return errFailed
	}
	p.verdict(fmt.Sprintf("VERDICT %s: PASS %s", opts.scenario, verdict))
	return nil
}

// setLive hands the terminal to the view or takes it back; taking it back
// prints the narrative lines no redraw has shown.
func (p *printer) setLive(live bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live && !live {
		for _, l := range p.undrawn {
			fmt.Fprintln(p.w, l)
		}
		p.undrawn = nil
	}
	p.live = live
}

// isTerminal reports whether w is a character device.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
