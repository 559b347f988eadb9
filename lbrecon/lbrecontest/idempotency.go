package lbrecontest

import (
	"context"
	"fmt"

	"github.com/reconkit/reconkit/lbrecon"
)

// CreateIdempotent implements lbrecon.IdempotentCreator with
// Config.Idempotency: a creation with a token seen before returns the
// object that token's creation made, as it is now (even while lists lag),
// and creates nothing; it counts as a create call. Tokens are kept for the
// engine's life.
func (e *Engine) CreateIdempotent(ctx context.Context, obj lbrecon.Object, token string) (lbrecon.Object, error) {
	if !e.cfg.Idempotency {
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: idempotency tokens: %w", lbrecon.ErrNotSupported)
	}
	f, err := e.begin(ctx, lbrecon.VerbCreate, obj)
	if err != nil {
		return lbrecon.Object{}, err
	}
	e.mu.Lock()
	if k, ok := e.tokens[token]; ok {
		defer e.mu.Unlock()
		if o, ok := e.objs[k]; ok {
			return e.view(o, e.clock.Now()), nil
		}
		return lbrecon.Object{}, fmt.Errorf("lbrecontest: 404 the creation of token %s was deleted: %w", token, lbrecon.ErrNotFound)
	}
	before := e.nextID[e.idKind(obj.Kind)]
	e.mu.Unlock()
	if err := e.admit(obj); err != nil {
		return lbrecon.Object{}, err
	}
	var got lbrecon.Object
	if f != nil {
		err = f.apply(e, obj)
	} else {
		got, err = e.store(obj)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, o := range e.objs { // the object this call stored, answer lost or not
		if k.Kind == obj.Kind && o.Name == obj.Name && idNumber(k.ID) > before {
			e.tokens[token] = k
		}
	}
	return got, err
}

func idNumber(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "id-%d", &n)
	return n
}

func (e *Engine) idKind(kind string) string {
	if !e.cfg.IDsPerKind {
		return ""
	}
	return kind
}
