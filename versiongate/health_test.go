package versiongate_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
)

// TestRecordCheck: the check passes while the record is valid and fails
// once it has not been valid for longer than the grace: before it was
// published, and after it was lost.
func TestRecordCheck(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	c.store.SetStatus(encodeStatus(t, versiongate.Status{State: versiongate.StateDone,
		Version: versiongate.Version{Release: mustRelease(t, "1.0.0")}, MinimumCompatibleRelease: mustRelease(t, "1.0.0")}))
	n := c.node("n1", "1.0.0", "1.0.0", -1)
	const grace = 2 * time.Second
	check := n.gate.RecordCheck(grace)

	require.NoError(t, check(nil), "not published yet, within the grace")
	c.recClock.Step(grace)
	require.NoError(t, check(nil), "not published yet, at the grace")
	c.recClock.Step(time.Millisecond)
	err := check(nil)
	require.ErrorIs(t, err, versiongate.ErrRecordLost)
	require.ErrorContains(t, err, "not published")

	n.run(t)
	require.NoError(t, n.gate.WaitReady(ctx))
	require.NoError(t, check(nil), "published")

	n.conn.DropKeepAlives(true)
	c.stepRecord(versiongate.DefaultRecordTTL - 500*time.Millisecond)
	require.ErrorIs(t, n.runErr(t), versiongate.ErrRecordLost)
	require.NoError(t, check(nil), "lost, first seen now: within the grace")
	c.recClock.Step(grace + time.Millisecond)
	err = check(nil)
	require.ErrorIs(t, err, versiongate.ErrRecordLost)
	require.ErrorContains(t, err, "is lost")
}

// TestRecordCheckHostOwnedRecords: with Decode set the gate holds no
// record, and the check passes.
func TestRecordCheckHostOwnedRecords(t *testing.T) {
	c := newMemCluster(t)
	n := c.node("n1", "1.0.0", "1.0.0", -1, func(cfg *versiongate.Config) { cfg.Decode = decodeRelease })
	check := n.gate.RecordCheck(0)
	require.NoError(t, check(nil))
	c.recClock.Step(time.Hour)
	require.NoError(t, check(nil))
}
