package configmapsource_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
)

// A Source delivers the ConfigMap's payload; in a host it is the Source of
// a checkpoint.Controller, which assigns what it delivers.
func Example() {
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "3f2a", ResourceVersion: "41"},
		Data:       map[string]string{"config": "workers=8"},
	})
	src, err := configmapsource.New(configmapsource.Config{Client: client, Namespace: "kube-system", Name: "agent", Key: "config"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	_ = src.Watch(ctx, func(_ context.Context, payload []byte, s checkpoint.Source) {
		id, _ := s.ID()
		fmt.Printf("%s as checkpoint %s from %s\n", payload, id, s.Origin)
		cancel() // one delivery is enough here
	})
	// Output:
	// workers=8 as checkpoint 3f2a_41 from configmap kube-system/agent key config
}
