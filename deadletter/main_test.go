package deadletter_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.VerifyNoLeaks()) }

var (
	backends = queuetest.Kinds
	discard  = slog.New(slog.DiscardHandler)
	// ignoreIdentity leaves out of a comparison of fairq-meta the id and
	// first receive a moved message is given.
	ignoreIdentity = cmpopts.IgnoreFields(envelope.Meta{}, "ID", "FirstReceivedAt")
)

func setup(t testing.TB, kind string) (queue.Backend, queue.Names) {
	t.Helper()
	return queuetest.Pool(t, kind)
}

type msg struct {
	body   string
	tenant string
	meta   *envelope.Meta
	attrs  map[string]string
}

func send(t testing.TB, b queue.Backend, q string, m msg) string {
	t.Helper()
	return queuetest.Put(t, b, q, queuetest.Msg{Body: m.body, Tenant: m.tenant, Meta: m.meta, Attrs: m.attrs})
}

// depth returns the messages on q, in flight and delayed included.
func depth(t testing.TB, b queue.Backend, q string) int {
	t.Helper()
	d, err := b.Depth(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return d.Visible + d.NotVisible + d.Delayed
}
