package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestImage builds the container image as `make image` does when no docker
// daemon answers (buildah, vfs storage, chroot isolation; in storage of the
// test's own), checks its configuration, and runs it: `fairq version`
// reports the stamped version, and `fairq dev` on the host's network takes
// a message over loopback with the key it prints and processes it.
func TestImage(t *testing.T) {
	buildah := tool(t, "buildah", "install Debian's buildah (make deps)")
	makeBin := tool(t, "make", "install make")
	dir := t.TempDir()
	bh := []string{buildah, "--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs"}
	const (
		image    = "localhost/fairq-test:image"
		version  = "v0.0.0-test.1"
		revision = "0123456789abcdef0123456789abcdef01234567"
	)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	mk := exec.CommandContext(ctx, makeBin, "-C", "..", "image",
		"IMAGE_BUILDER=buildah", "BUILDAH="+strings.Join(bh[:5], " "),
		"IMAGE=localhost/fairq-test", "IMAGE_TAG=image", "IMAGE_CONTEXT="+filepath.Join(dir, "context"),
		"VERSION="+version, "REVISION="+revision, "MODIFIED=false")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(bh[0], append(bh[1:], "rm", "--all")...).Run() })

	// The image's configuration.
	var inspect struct {
		OCIv1 struct {
			Config struct {
				User       string
				Entrypoint []string
				Labels     map[string]string
			} `json:"config"`
		}
	}
	out := buildahOut(t, ctx, bh, "inspect", "--type", "image", image)
	if err := json.Unmarshal(out, &inspect); err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	cfg := inspect.OCIv1.Config
	if cfg.User != "65532:65532" || !slices.Equal(cfg.Entrypoint, []string{"/fairq"}) {
		t.Errorf("image user %q, entrypoint %q; want 65532:65532 and [/fairq]", cfg.User, cfg.Entrypoint)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.source":   "https://github.com/fairq/fairq",
	} {
		if got := cfg.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	var images []struct{ Size string }
	if err := json.Unmarshal(buildahOut(t, ctx, bh, "images", "--json", image), &images); err != nil || len(images) != 1 {
		t.Fatalf("buildah images: %v %v", images, err)
	}
	t.Logf("image %s: %s", image, images[0].Size)

	ctr := strings.TrimSpace(string(buildahOut(t, ctx, bh, "from", "--pull-never", image)))
	runIn := func(args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, bh[0], append(append(bh[1:], "run", "--isolation", "chroot", "--network", "host", ctr, "--"), args...)...)
	}

	// The files a TLS client and a non-root user need.
	mnt := strings.TrimSpace(string(buildahOut(t, ctx, bh, "mount", ctr)))
	for _, f := range []string{"etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group", "fairq"} {
		if fi, err := os.Stat(filepath.Join(mnt, f)); err != nil || fi.Size() == 0 {
			t.Errorf("/%s in the image: %v", f, err)
		}
	}
	buildahOut(t, ctx, bh, "umount", ctr)

	out, err := runIn("/fairq", "version").CombinedOutput()
	if err != nil || !bytes.HasPrefix(out, []byte("fairq "+version+"\n")) || !bytes.Contains(out, []byte("revision: "+revision+"\n")) {
		t.Errorf("fairq version in the image: %v\n%s", err, out)
	}
	// Negative control: a failing command fails through buildah run.
	if out, err := runIn("/fairq", "frobnicate").CombinedOutput(); err == nil {
		t.Errorf("fairq frobnicate in the image succeeded: the check cannot fail\n%s", out)
	}

	t.Run("dev", func(t *testing.T) { imageDev(t, ctx, runIn) })

	// Negative control: the Dockerfile does not build without the staged
	// binary.
	empty := t.TempDir()
	bud := exec.CommandContext(ctx, bh[0], append(bh[1:], "bud", "--isolation", "chroot", "-f", filepath.Join("..", "Dockerfile"), "-t", "localhost/fairq-test:broken", empty)...)
	if out, err := bud.CombinedOutput(); err == nil {
		t.Errorf("the image built from an empty context: the check cannot fail\n%s", out)
	}
}

var processed = regexp.MustCompile(`msg=message tenant=demo id=(\S+)`)

// imageDev runs `fairq dev` in the image and sends it one message.
func imageDev(t *testing.T, ctx context.Context, runIn func(...string) *exec.Cmd) {
	addr := freeAddr(t)
	cmd := runIn("/fairq", "dev", "--listen", addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			cmd.Wait()
		}
	}
	defer stop()

	var log []string
	wait := func(what string, match func(string) bool) string {
		t.Helper()
		timer := time.NewTimer(60 * time.Second)
		defer timer.Stop()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("fairq dev ended before %s; its output:\n%s", what, strings.Join(log, "\n"))
				}
				log = append(log, l)
				if match(l) {
					return l
				}
			case <-timer.C:
				t.Fatalf("no %s within 60 s; output so far:\n%s", what, strings.Join(log, "\n"))
			}
		}
	}
	keyLine := wait("demo key", func(l string) bool { return strings.HasPrefix(l, "api key for tenant demo: ") })
	key := strings.TrimPrefix(keyLine, "api key for tenant demo: ")

	if uid := processUID(t, "/fairq\x00dev\x00--listen\x00"+addr); uid != "65532" {
		t.Errorf("fairq runs as uid %s in the image, want 65532 (the image's user)", uid)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/messages", strings.NewReader(`{"body":{"hello":"image"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var accepted struct{ ID string }
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &accepted) != nil || accepted.ID == "" {
		t.Fatalf("POST /v1/messages: %s %s", resp.Status, body)
	}
	wait("message "+accepted.ID+" processed", func(l string) bool {
		m := processed.FindStringSubmatch(l)
		return m != nil && m[1] == accepted.ID
	})
	stop()
}

// processUID returns the uid of the process whose command line is cmdline
// (arguments separated by NUL), as the host sees it.
func processUID(t *testing.T, cmdline string) string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.HasPrefix(string(b), cmdline) {
			continue
		}
		status, err := os.ReadFile(filepath.Join(filepath.Dir(p), "status"))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				return f[1]
			}
		}
	}
	t.Fatalf("no process %q", strings.ReplaceAll(cmdline, "\x00", " "))
	return ""
}

// freeAddr returns a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// buildahOut runs buildah with args and returns its standard output.
func buildahOut(t *testing.T, ctx context.Context, bh []string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, bh[0], append(bh[1:], args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(append([]string{"buildah"}, args...), " "), err, stderr.String())
	}
	return out
}
