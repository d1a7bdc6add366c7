package consumer

import (
	"context"
	"testing"
)

// TestLiveStateWatch: the backlog's share follows the watched queues: a
// queue gained counts as not yet polled, a queue lost is forgotten, and a
// receive from a queue no longer watched is ignored.
func TestLiveStateWatch(t *testing.T) {
	s := newLiveState()
	polled := func() bool {
		select {
		case <-s.polled:
			return true
		default:
			return false
		}
	}
	type want struct {
		share  share
		idle   bool
		polled bool
	}
	check := func(step string, w want) {
		t.Helper()
		if got := s.backlogShare(); got != w.share {
			t.Errorf("%s: backlogShare = %v, want %v", step, got, w.share)
		}
		if got := s.isIdle(); got != w.idle {
			t.Errorf("%s: isIdle = %v, want %v", step, got, w.idle)
		}
		if got := polled(); got != w.polled {
			t.Errorf("%s: polled = %v, want %v", step, got, w.polled)
		}
	}

	s.watch([]string{"a", "b"})
	check("two queues, none polled", want{shareNone, false, false})
	s.set("a", 0, 1)
	check("one of two polled", want{shareNone, false, false})
	s.set("b", 10, 10)
	check("both polled, b full", want{shareNone, false, true})
	s.set("b", 3, 10)
	check("b partial", want{shareMost, false, true})
	s.set("b", 0, 1)
	check("both empty", want{shareAll, true, true})

	s.watch([]string{"a", "b", "c"})
	check("c gained, not yet polled", want{shareNone, false, true})
	s.set("c", 10, 10)
	check("c full", want{shareNone, false, true})
	s.watch([]string{"a", "b"})
	check("c lost with its full receive", want{shareAll, true, true})
	s.set("c", 10, 10)
	check("a late receive from c", want{shareAll, true, true})

	s.watch(nil)
	check("no live queue: all capacity is spare", want{shareAll, true, true})
}

// TestLiveStateNoQueues: a worker that watches no live queue from the
// start lets the backlog start at once.
func TestLiveStateNoQueues(t *testing.T) {
	s := newLiveState()
	s.watch(nil)
	if err := s.waitPolled(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.backlogShare(); got != shareAll {
		t.Errorf("backlogShare = %v, want all", got)
	}
}
