package testbin

import (
	"strings"
	"testing"
)

func TestParseVersions(t *testing.T) {
	tests := []struct {
		name    string
		gomod   string
		want    Versions
		wantErr string
	}{
		{
			name:  "require block",
			gomod: "module x\n\ngo 1.26.0\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.7.0\n\tk8s.io/kubernetes v1.37.1 // pinned\n)\n",
			want:  Versions{Kubernetes: "v1.37.1", Etcd: "v3.7.0"},
		},
		{
			name:  "single-line requires",
			gomod: "module x\nrequire k8s.io/kubernetes v1.36.2\nrequire go.etcd.io/etcd/server/v3 v3.6.1\n",
			want:  Versions{Kubernetes: "v1.36.2", Etcd: "v3.6.1"},
		},
		{
			name: "replace gives another version; local replaces are ignored",
			gomod: "module x\nrequire (\n\tk8s.io/kubernetes v1.37.0\n\tgo.etcd.io/etcd/server/v3 v3.7.0\n)\n" +
				"replace (\n\tk8s.io/kubernetes => k8s.io/kubernetes v1.37.1\n\tgo.etcd.io/etcd/server/v3 => ../etcd\n)\n",
			want: Versions{Kubernetes: "v1.37.1", Etcd: "v3.7.0"},
		},
		{
			name:    "kubernetes missing",
			gomod:   "module x\nrequire go.etcd.io/etcd/server/v3 v3.7.0\n",
			wantErr: "does not require k8s.io/kubernetes",
		},
		{
			name:    "etcd missing",
			gomod:   "module x\nrequire k8s.io/kubernetes v1.37.1\n",
			wantErr: "does not require go.etcd.io/etcd/server/v3",
		},
		{
			name:    "odd kubernetes version",
			gomod:   "module x\nrequire k8s.io/kubernetes master\nrequire go.etcd.io/etcd/server/v3 v3.7.0\n",
			wantErr: `version "master" is not of the form vMAJOR.MINOR.PATCH`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVersions([]byte(tt.gomod))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseVersions = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseVersions = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestTargets(t *testing.T) {
	ts := targets(Versions{Kubernetes: "v1.37.1", Etcd: "v3.7.0"}, "-X a=b")
	if len(ts) != 2 {
		t.Fatalf("targets = %v", ts)
	}
	if ts[0].name != "etcd" || ts[0].pkg != "go.etcd.io/etcd/server/v3" || ts[0].want != "etcd Version: 3.7.0" || ts[0].ldflags != "" {
		t.Errorf("etcd target = %+v", ts[0])
	}
	if ts[1].name != "kube-apiserver" || ts[1].pkg != "k8s.io/kubernetes/cmd/kube-apiserver" || ts[1].want != "Kubernetes v1.37.1" || ts[1].ldflags != "-X a=b" {
		t.Errorf("kube-apiserver target = %+v", ts[1])
	}
}
