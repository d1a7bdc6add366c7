package sharedpoll_test

import (
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.VerifyNoLeaks()) }
