package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/throttle"
)

// BenchmarkEnqueue is the whole in-process path of POST /v1/messages:
// authentication, decoding, admission, the pick and the send through the
// batcher into a Memory backend, without a send window. Concurrent callers
// share batches as they would under load; sends/msg is SendMessageBatch
// calls per message.
func BenchmarkEnqueue(b *testing.B) { benchmarkEnqueue(b, 0) }

// BenchmarkEnqueueWindow is BenchmarkEnqueue with gateway.send_window at
// its default. Each caller waits for its answer before it sends again, so
// a batch that is not full waits out the window, the callers of the other
// queues being blocked on theirs: with few callers the window, not the
// handler, sets the pace.
func BenchmarkEnqueueWindow(b *testing.B) { benchmarkEnqueue(b, sendWindowDefault) }

// sendWindowDefault is gateway.send_window's default.
const sendWindowDefault = 10 * time.Millisecond

func benchmarkEnqueue(b *testing.B, window time.Duration) {
	for _, par := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			f := setup(b, func(c *gateway.Config) {
				c.Now = time.Now
				c.SendWindow = window
				c.Limiter = throttle.NewLocalLimiter(throttle.LocalConfig{})
			})
			body := `{"body":"{\"order\":42,\"note\":\"a short job\"}","attributes":{"kind":"email"}}`
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+benchKey)
					w := httptest.NewRecorder()
					f.srv.ServeHTTP(w, req)
					if w.Code != http.StatusAccepted {
						b.Errorf("status %d: %s", w.Code, w.Body)
						return
					}
				}
			})
			calls, _ := f.flaky.Sends()
			b.ReportMetric(float64(calls)/float64(b.N), "sends/msg")
		})
	}
}
