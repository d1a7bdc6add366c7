// Command baseline is the yardstick of the gateway load test: a bare
// net/http server that answers every request 202 with a JSON body the size
// of fairq's, doing nothing else. The gateway's throughput is reported as a
// ratio to this server's, measured in the same run on the same machine.
//
//	go run ./loadtest/baseline -listen 127.0.0.1:8090
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	body := []byte(`{"id":"00000000-0000-0000-0000-000000000000","tenant":"t00","queue":"fairq-live-00","enqueued_at":"2026-01-01T00:00:00.000Z"}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(body)
	})
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "baseline:", err)
		os.Exit(1)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	<-errc
}
