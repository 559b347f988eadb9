package backoff

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	cbackoff "github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"
)

func TestPermanent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		require.NoError(t, Permanent(nil))
		require.False(t, IsPermanent(nil))
		require.False(t, IsPermanent(errBoom))

		p := Permanent(errBoom)
		require.True(t, IsPermanent(p))
		require.ErrorIs(t, p, errBoom)
		require.Equal(t, "boom", p.Error())
		require.True(t, IsPermanent(fmt.Errorf("outer: %w", p)), "seen through wrapping")
		require.True(t, IsPermanent(cbackoff.Permanent(errBoom)))
		require.True(t, IsPermanent(RetryAfter(p, time.Second)))
	})
}

func TestRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		require.NoError(t, RetryAfter(nil, time.Second))

		e := RetryAfter(errBoom, 3*time.Second)
		require.ErrorIs(t, e, errBoom)
		require.Equal(t, "boom", e.Error())
		d, ok := retryAfterHint(fmt.Errorf("outer: %w", e))
		require.True(t, ok)
		require.Equal(t, 3*time.Second, d)

		d, ok = retryAfterHint(errors.Join(errors.New("other"), hintErr{time.Minute}))
		require.True(t, ok, "a host type is found in joined errors too")
		require.Equal(t, time.Minute, d)

		_, ok = retryAfterHint(errBoom)
		require.False(t, ok)
	})
}
