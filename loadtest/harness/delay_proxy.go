package harness

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// delayProxy is an HTTP reverse proxy on 127.0.0.1 that holds every
// request for a fixed delay before passing it on to a server (the SQS
// emulator), so that each call fairq makes takes about as long as one to
// SQS in a region does rather than the emulator's millisecond. The Host
// header is kept, so that a request's signature and the queue URLs the
// emulator builds from it still name the proxy.
type delayProxy struct {
	srv   *http.Server
	ln    net.Listener
	tr    *http.Transport // to the target
	delay time.Duration
	calls atomic.Int64 // requests passed on
	wg    sync.WaitGroup
}

// startDelayProxy listens on a free loopback port and passes requests on
// to target (a base URL such as http://127.0.0.1:PORT) after delay, until
// close.
func startDelayProxy(target string, delay time.Duration) (*delayProxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("delay proxy: target %q is not a base URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("delay proxy to %s: %w", target, err)
	}
	p := &delayProxy{ln: ln, delay: delay, tr: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}}
	rp := &httputil.ReverseProxy{
		Transport: p.tr,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		},
		// Long polls stay open up to 20 s: pass each answer on as it comes.
		FlushInterval: -1,
		// fairq gives up on calls (its send timeout, a long poll at
		// shutdown): the client is gone, there is no one to tell.
		ErrorLog:     log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
			p.calls.Add(1)
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	p.wg.Go(func() { _ = p.srv.Serve(ln) }) // ErrServerClosed, at close
	return p, nil
}

// url is the base URL to give fairq in place of the target's.
func (p *delayProxy) url() string { return "http://" + p.ln.Addr().String() }

// requests returns how many requests the proxy has passed on.
func (p *delayProxy) requests() int64 { return p.calls.Load() }

// close stops the proxy, cutting what it still carries, and waits for it.
func (p *delayProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if p.srv.Shutdown(ctx) != nil {
		p.srv.Close()
	}
	p.wg.Wait()
	p.tr.CloseIdleConnections()
}
