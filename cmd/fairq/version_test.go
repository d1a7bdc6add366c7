package main

import (
	"bytes"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadBuild(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/fairq/fairq", Version: "v0.0.0-20261125080500-cbded55abcde+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "cbded55abcde0123456789abcdef0123456789ab"},
			{Key: "vcs.time", Value: "2026-11-25T08:05:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	devel := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/fairq/fairq", Version: "(devel)"}}
	tests := []struct {
		name   string
		bi     *debug.BuildInfo
		ok     bool
		linked [4]string // version, revision, modified, buildTime
		want   build
	}{
		{
			name: "no build information",
			want: build{Version: "dev"},
		},
		{
			name: "go build outside a clone",
			bi:   devel, ok: true,
			want: build{Version: "dev", GoVersion: "go1.26.8"},
		},
		{
			name: "go build in a clone: stamped by the go command",
			bi:   stamped, ok: true,
			want: build{
				Version:  "v0.0.0-20261125080500-cbded55abcde+dirty",
				Revision: "cbded55abcde0123456789abcdef0123456789ab", Modified: true,
				Time: "2026-11-25T08:05:00Z", TimeKind: "committed", GoVersion: "go1.26.8",
			},
		},
		{
			name: "make build: link-time flags win",
			bi:   stamped, ok: true,
			linked: [4]string{"v0.1.0-2-gcbded55", "cbded55abcde0123456789abcdef0123456789ab", "false", "2026-11-25T09:00:00Z"},
			want: build{
				Version:  "v0.1.0-2-gcbded55",
				Revision: "cbded55abcde0123456789abcdef0123456789ab",
				Time:     "2026-11-25T09:00:00Z", TimeKind: "built", GoVersion: "go1.26.8",
			},
		},
		{
			name: "make build where the go command stamps nothing",
			bi:   devel, ok: true,
			linked: [4]string{"v0.1.0-dirty", "0123456789abcdef0123456789abcdef01234567", "true", ""},
			want: build{
				Version:  "v0.1.0-dirty",
				Revision: "0123456789abcdef0123456789abcdef01234567", Modified: true, GoVersion: "go1.26.8",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setLinked(t, tt.linked)
			got := readBuild(tt.bi, tt.ok)
			if tt.want.GoVersion == "" {
				tt.want.GoVersion = got.GoVersion // the running toolchain's
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("readBuild (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteVersion(t *testing.T) {
	var buf bytes.Buffer
	writeVersion(&buf, build{
		Version: "v0.1.0", Revision: "cbded55abcde0123456789abcdef0123456789ab", Modified: true,
		Time: "2026-11-25T09:00:00Z", TimeKind: "built", GoVersion: "go1.26.8",
	})
	got := buf.String()
	for _, want := range []string{
		"fairq v0.1.0\n",
		"revision: cbded55abcde0123456789abcdef0123456789ab (modified)\n",
		"built: 2026-11-25T09:00:00Z\n",
		"go: 1.26.8 ",
	} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("fairq version printed %q, want it to contain %q", got, want)
		}
	}
}

// setLinked sets the link-time variables for one test and restores them.
func setLinked(t *testing.T, v [4]string) {
	old := [4]string{version, revision, modified, buildTime}
	version, revision, modified, buildTime = v[0], v[1], v[2], v[3]
	t.Cleanup(func() { version, revision, modified, buildTime = old[0], old[1], old[2], old[3] })
}
