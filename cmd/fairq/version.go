package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by `make build`, `make image` and `make release`:
//
//	-ldflags "-X main.version=v1.2.3 -X main.revision=<sha> -X main.modified=true -X main.buildTime=<RFC 3339>"
//
// Each one left empty is read from the binary's build information: the
// module version (`go install …@v1.2.3`, or the pseudo-version the go
// command derives from the commit), and the revision, dirty flag and commit
// time it stamps when it builds inside a git clone.
var (
	version   = ""
	revision  = ""
	modified  = ""
	buildTime = ""
)

// build describes the running binary.
type build struct {
	Version   string // one token: v1.2.3, v1.2.3-4-gabcdef0-dirty, or "dev"
	Revision  string // the VCS commit, empty when unknown
	Modified  bool   // built from a tree with uncommitted changes
	Time      string // when it was built (or, lacking that, the commit's time)
	TimeKind  string // "built" or "committed"
	GoVersion string
}

// versionDefault is what a binary built outside any VCS and without
// link-time flags calls itself.
const versionDefault = "dev"

// readBuild merges the link-time variables with the build information.
func readBuild(bi *debug.BuildInfo, ok bool) build {
	b := build{GoVersion: runtime.Version()}
	var vcsTime string
	if ok {
		b.GoVersion = bi.GoVersion
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			case "vcs.time":
				vcsTime = s.Value
			}
		}
	}
	if version != "" {
		b.Version = version
	}
	if revision != "" {
		b.Revision = revision
		b.Modified = modified == "true"
	}
	switch {
	case buildTime != "":
		b.Time, b.TimeKind = buildTime, "built"
	case vcsTime != "":
		b.Time, b.TimeKind = vcsTime, "committed"
	}
	if b.Version == "" {
		b.Version = versionDefault
	}
	return b
}

// buildVersion is the binary's version as one token: what `fairq version`
// prints first, the start-up log lines carry and the worker's User-Agent
// names (aws-sqsd/1.11 (fairq/<version>)).
func buildVersion() string {
	return readBuild(debug.ReadBuildInfo()).Version
}

// writeVersion prints what `fairq version` shows: the version on the first
// line, then what it was built from.
func writeVersion(w io.Writer, b build) {
	fmt.Fprintf(w, "fairq %s\n", b.Version)
	if b.Revision != "" {
		rev := b.Revision
		if b.Modified {
			rev += " (modified)"
		}
		fmt.Fprintf(w, "revision: %s\n", rev)
	}
	if b.Time != "" {
		fmt.Fprintf(w, "%s: %s\n", b.TimeKind, b.Time)
	}
	fmt.Fprintf(w, "go: %s %s/%s\n", strings.TrimPrefix(b.GoVersion, "go"), runtime.GOOS, runtime.GOARCH)
}
