package serving

import (
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
)

// tlsVersions are the --tls-min-version names KCM accepts.
var tlsVersions = map[string]uint16{
	"VersionTLS10": tls.VersionTLS10,
	"VersionTLS11": tls.VersionTLS11,
	"VersionTLS12": tls.VersionTLS12,
	"VersionTLS13": tls.VersionTLS13,
}

func tlsVersion(name string) (uint16, error) {
	if v, ok := tlsVersions[name]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("unknown TLS version %q", name)
}

// cipherSuites maps --tls-cipher-suites names (crypto/tls's, which are
// KCM's, plus the two older ChaCha20 spellings KCM also accepts) to IDs.
func cipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	known := map[string]uint16{
		"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	}
	for _, c := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[c.Name] = c.ID
	}
	ids := make([]uint16, 0, len(names))
	for _, n := range names {
		id, ok := known[n]
		if !ok {
			return nil, fmt.Errorf("unknown cipher suite %q", n)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// preferredCipherNames are the secure suites, for help and errors.
func preferredCipherNames() []string {
	var out []string
	for _, c := range tls.CipherSuites() {
		out = append(out, c.Name)
	}
	return slices.Sorted(slices.Values(out))
}

// insecureCipherNames are the suites Go marks insecure.
func insecureCipherNames() []string {
	var out []string
	for _, c := range tls.InsecureCipherSuites() {
		out = append(out, c.Name)
	}
	return slices.Sorted(slices.Values(out))
}

func versionNames() []string { return slices.Sorted(maps.Keys(tlsVersions)) }
