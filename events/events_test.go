package events_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/events"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
)

// One Recorder serves every package.
var (
	_ checkpoint.EventRecorder  = events.Recorder{}
	_ election.EventRecorder    = events.Recorder{}
	_ nodestatus.EventRecorder  = events.Recorder{}
	_ versiongate.EventRecorder = events.Recorder{}
)

func TestForObject(t *testing.T) {
	fake := record.NewFakeRecorder(10)
	fake.IncludeObject = true
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "u-1"},
	}
	rec := events.ForObject(fake, node)
	rec.Event(corev1.EventTypeWarning, checkpoint.EventReasonRolledBack, "TrialProbeFailed: health probe failed")
	rec.Event(corev1.EventTypeNormal, checkpoint.EventReasonConfirmed, "checkpoint \"a_1\" passed its trial")
	require.Len(t, fake.Events, 2)
	require.Equal(t, "Warning ConfigRolledBack TrialProbeFailed: health probe failed involvedObject{kind=Node,apiVersion=v1}", <-fake.Events)
	require.Equal(t, "Normal ConfigConfirmed checkpoint \"a_1\" passed its trial involvedObject{kind=Node,apiVersion=v1}", <-fake.Events)
}

func TestNilRecordsNothing(t *testing.T) {
	var zero events.Recorder
	zero.Event(corev1.EventTypeNormal, "Reason", "no panic")
	events.ForObject(nil, &corev1.Node{}).Event(corev1.EventTypeNormal, "Reason", "no panic")
	fake := record.NewFakeRecorder(1)
	events.ForObject(fake, nil).Event(corev1.EventTypeNormal, "Reason", "no object")
	require.Empty(t, fake.Events)
}
