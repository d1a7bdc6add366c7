package harness

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDelayProxy: a request through the proxy reaches the server with its
// body and the proxy's Host, no sooner than the delay; without a delay
// the same request is answered well within it.
func TestDelayProxy(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Host+" "+string(body))
	}))
	defer srv.Close()
	const delay = 300 * time.Millisecond
	for _, d := range []time.Duration{delay, 0} {
		p, err := startDelayProxy(srv.URL, d)
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: &http.Transport{}}
		start := time.Now()
		resp, err := client.Post(p.url()+"/queue", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		client.CloseIdleConnections()
		p.close()
		if want := strings.TrimPrefix(p.url(), "http://") + " hello"; string(got) != want {
			t.Errorf("delay %v: the server saw %q, want %q", d, got, want)
		}
		if p.requests() != 1 {
			t.Errorf("delay %v: %d requests passed on, want 1", d, p.requests())
		}
		switch {
		case d > 0 && took < d:
			t.Errorf("answered after %v, before the delay of %v", took, d)
		case d == 0 && took >= delay:
			t.Errorf("answered after %v without a delay: the test cannot tell a delay of %v", took, delay)
		}
	}
	if _, err := startDelayProxy("127.0.0.1:1", 0); err == nil {
		t.Error("a target without a scheme was taken")
	}
}
