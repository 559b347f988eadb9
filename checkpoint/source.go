package checkpoint

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ConfigMapSource is a [ConfigSource] that reads one key of a ConfigMap
// through client-go. The ConfigMap's UID and resourceVersion identify the
// checkpoint, so every update of the ConfigMap is a new checkpoint (the
// Controller skips one whose payload equals the running one).
type ConfigMapSource struct {
	// Client reads the ConfigMap. Required.
	Client kubernetes.Interface
	// Namespace and Name locate the ConfigMap. Required.
	Namespace, Name string
	// Key is the data key holding the payload; it is looked up in Data,
	// then in BinaryData. Required.
	Key string
}

var _ ConfigSource = (*ConfigMapSource)(nil)

// Fetch implements [ConfigSource]. A missing ConfigMap wraps [ErrNotFound];
// a ConfigMap without Key is an error.
func (s *ConfigMapSource) Fetch(ctx context.Context) ([]byte, Source, error) {
	if s.Client == nil || s.Namespace == "" || s.Name == "" || s.Key == "" {
		return nil, Source{}, errors.New("checkpoint: ConfigMapSource needs Client, Namespace, Name and Key")
	}
	origin := fmt.Sprintf("configmap %s/%s key %s", s.Namespace, s.Name, s.Key)
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, Source{}, fmt.Errorf("checkpoint: %s: %w: %w", origin, ErrNotFound, err)
	}
	if err != nil {
		return nil, Source{}, fmt.Errorf("checkpoint: get %s: %w", origin, err)
	}
	src := Source{UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Origin: origin}
	if v, ok := cm.Data[s.Key]; ok {
		return []byte(v), src, nil
	}
	if v, ok := cm.BinaryData[s.Key]; ok {
		return append([]byte(nil), v...), src, nil
	}
	return nil, Source{}, fmt.Errorf("checkpoint: %s: key missing (resourceVersion %s)", origin, cm.ResourceVersion)
}
