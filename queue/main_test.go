package queue_test

import (
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

// TestMain stops the services the SQS tests start, then checks that no
// goroutine outlived the tests.
func TestMain(m *testing.M) { testenv.Main(m, testenv.VerifyNoLeaks()) }
