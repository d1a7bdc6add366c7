package main

import "runtime/debug"

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise
// it comes from the module's build information.
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
