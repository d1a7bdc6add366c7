package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRelease runs `make release` into a directory of its own and checks
// what it makes: a static Linux binary for each architecture, the version
// stamped in, and a SHA256SUMS that sha256sum verifies.
func TestRelease(t *testing.T) {
	makeBin := tool(t, "make", "install make")
	sha256sum := tool(t, "sha256sum", "install coreutils")
	dist := t.TempDir()
	const version = "v0.0.0-release.1"
	out, err := exec.CommandContext(t.Context(), makeBin, "-C", "..", "release", "DIST="+dist, "VERSION="+version).CombinedOutput()
	if err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		bin := filepath.Join(dist, "fairq_"+version+"_linux_"+arch)
		f, err := elf.Open(bin)
		if err != nil {
			t.Errorf("%s: %v", arch, err)
			continue
		}
		if f.Machine != machine || f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
			t.Errorf("%s: machine %v, ABI %v", bin, f.Machine, f.OSABI)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: dynamically linked (%v): want a static binary", bin, p.Type)
			}
		}
		f.Close()
		if arch == runtime.GOARCH {
			v, err := exec.Command(bin, "version").Output()
			if err != nil || !strings.HasPrefix(string(v), "fairq "+version+"\n") {
				t.Errorf("%s version: %v\n%s", bin, err, v)
			}
		}
	}
	check := func() ([]byte, error) {
		cmd := exec.CommandContext(t.Context(), sha256sum, "--check", "--strict", "SHA256SUMS")
		cmd.Dir = dist
		return cmd.CombinedOutput()
	}
	if out, err := check(); err != nil {
		t.Errorf("sha256sum --check SHA256SUMS: %v\n%s", err, out)
	}
	// Negative control: a changed binary no longer matches its sum.
	bin := filepath.Join(dist, "fairq_"+version+"_linux_arm64")
	f, err := os.OpenFile(bin, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	if out, err := check(); err == nil {
		t.Errorf("sha256sum accepted a changed binary: the check cannot fail\n%s", out)
	}
}
