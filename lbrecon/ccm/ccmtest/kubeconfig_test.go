package ccmtest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// What a user's rest.Config says about the apiserver and the credentials
// reaches the controller's process; a Go value that cannot is refused,
// naming the field.
func TestKubeconfigCarriesTheCredentials(t *testing.T) {
	in := &rest.Config{
		Host:            "https://127.0.0.1:6443",
		BearerToken:     "token-1",
		BearerTokenFile: "/var/run/token",
		Impersonate:     rest.ImpersonationConfig{UserName: "ccm", Groups: []string{"system:masters"}},
		ExecProvider:    &clientcmdapi.ExecConfig{Command: "get-token", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode},
		TLSClientConfig: rest.TLSClientConfig{ServerName: "kubernetes", CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")},
	}
	kc, err := kubeconfig(in)
	require.NoError(t, err)
	cc, err := clientcmd.NewClientConfigFromBytes(kc)
	require.NoError(t, err)
	out, err := cc.ClientConfig()
	require.NoError(t, err)
	require.Equal(t, in.Host, out.Host)
	require.Equal(t, in.BearerToken, out.BearerToken)
	require.Equal(t, in.BearerTokenFile, out.BearerTokenFile)
	require.Equal(t, in.Impersonate.UserName, out.Impersonate.UserName)
	require.Equal(t, in.Impersonate.Groups, out.Impersonate.Groups)
	require.Equal(t, in.ExecProvider.Command, out.ExecProvider.Command)
	require.Equal(t, in.ServerName, out.ServerName)
	require.Equal(t, in.CAData, out.CAData)
	require.Equal(t, in.CertData, out.CertData)
	require.Equal(t, in.KeyData, out.KeyData)

	insecure, err := kubeconfig(&rest.Config{Host: "https://127.0.0.1:6443", Username: "admin", Password: "secret",
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	require.NoError(t, err)
	cc, err = clientcmd.NewClientConfigFromBytes(insecure)
	require.NoError(t, err)
	out, err = cc.ClientConfig()
	require.NoError(t, err)
	require.True(t, out.Insecure)
	require.Equal(t, "admin", out.Username)
	require.Equal(t, "secret", out.Password)

	wrapped := rest.CopyConfig(in)
	wrapped.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return rt }
	_, err = kubeconfig(wrapped)
	require.ErrorIs(t, err, ErrUnsupportedConfig)
	require.ErrorContains(t, err, "WrapTransport")
	_, err = kubeconfig(&rest.Config{})
	require.ErrorIs(t, err, ErrUnsupportedConfig)
}
