package consumer_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
)

// FuzzHeader: whatever a message carries, every header Push sends is a
// valid header (no injection), and a percent-encoded attribute decodes back
// to its value.
func FuzzHeader(f *testing.F) {
	f.Add("color", "blue", "acme", traceparent, "cleanup")
	f.Add("evil", "a\r\nX-Injected: 1", "t\n", "00-\r\n", "x\x00")
	f.Add("a b", "100%", "", "", "")
	f.Fuzz(func(t *testing.T, name, value, tenant, tp, task string) {
		m := &consumer.Message{
			ID: "id", Queue: "q", ReceiveCount: 1, FirstReceivedAt: time.Unix(1, 0),
			Tenant: tenant, Traceparent: tp,
			Attributes: map[string]string{name: value},
			Task:       &envelope.Task{Name: task, Path: "/t"},
		}
		h := consumer.Header(m)
		for k, vs := range h {
			if k == "" || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r == ':' || r >= 0x7f }) {
				t.Fatalf("invalid header name %q", k)
			}
			for _, v := range vs {
				if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
					t.Fatalf("header %s has a control character: %q", k, v)
				}
			}
		}
		v, ok := h[consumer.HeaderAttrPrefix+name]
		if !ok {
			return
		}
		if enc := h.Get(consumer.HeaderAttrEncoded); enc != "" {
			got, err := url.PathUnescape(v[0])
			if err != nil || got != value {
				t.Fatalf("encoded %q decodes to %q, %v", value, got, err)
			}
		} else if v[0] != value {
			t.Fatalf("attribute %q sent as %q", value, v[0])
		}
	})
}
