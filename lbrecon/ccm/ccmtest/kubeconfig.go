package ccmtest

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig returns cfg as a kubeconfig the controller's process loads:
// the server, its TLS settings, and the credentials (a bearer token or its
// file, basic auth, a client certificate, an exec or auth-provider
// plugin), with impersonation. A Go value of cfg that cannot cross to
// another process (a transport, a wrapper, a dialer, a proxy function, a
// rate limiter) is refused with an ErrUnsupportedConfig error naming it.
func kubeconfig(cfg *rest.Config) ([]byte, error) {
	for field, set := range map[string]bool{
		"Transport":     cfg.Transport != nil,
		"WrapTransport": cfg.WrapTransport != nil,
		"Dial":          cfg.Dial != nil,
		"Proxy":         cfg.Proxy != nil,
		"RateLimiter":   cfg.RateLimiter != nil,
	} {
		if set {
			return nil, fmt.Errorf("%w: rest.Config.%s is a Go value the controller's process cannot have; set QPS and Burst, or put a proxy in front of the apiserver and give its address as Host",
				ErrUnsupportedConfig, field)
		}
	}
	if cfg.Host == "" {
		return nil, fmt.Errorf("%w: rest.Config.Host is empty", ErrUnsupportedConfig)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["apiserver"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		DisableCompression:       cfg.DisableCompression,
	}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		Username:              cfg.Username,
		Password:              cfg.Password,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateUID:        cfg.Impersonate.UID,
		ImpersonateGroups:     cfg.Impersonate.Groups,
		ImpersonateUserExtra:  cfg.Impersonate.Extra,
		AuthProvider:          cfg.AuthProvider,
		Exec:                  cfg.ExecProvider,
	}
	kc.Contexts["apiserver"] = &clientcmdapi.Context{Cluster: "apiserver", AuthInfo: "user"}
	kc.CurrentContext = "apiserver"
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("ccmtest: encoding the kubeconfig: %w", err)
	}
	return out, nil
}
