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
// batcher into a Memory backend. Concurrent callers share batches as they
// would under load; sends/msg is SendMessageBatch calls per message.
func BenchmarkEnqueue(b *testing.B) {
	for _, par := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			f := setup(b, func(c *gateway.Config) {
				c.Now = time.Now
				c.BatchWindow = gateway.BatchWindowDefault
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
