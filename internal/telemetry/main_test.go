package telemetry

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the provider's
// batch processor and the exporter's connections end with Shutdown.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
