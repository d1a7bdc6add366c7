package batch

import (
	"math"
	"time"
)

// companyLikely is the number of further items the rest of a window must
// be expected to bring for an Adaptive batch to wait for them. A quarter
// of an item means a batch of 1.25 items on average, a fifth fewer calls:
// below that the wait costs every item latency for next to no saving, as
// for a key that sees a few items a second under a window of milliseconds.
const companyLikely = 0.25

// Over how long a key's rate is measured: ten windows, so that the count
// behind a decision is about ten times what one window gathers, and at
// least minRateHorizon, so that a short window still sees a steady rate
// rather than the last few items.
const (
	horizonWindows = 10
	minRateHorizon = 100 * time.Millisecond
)

// quietGaps is how many of a key's mean gaps between items an Adaptive
// batch waits without an item before it goes, its window or not. Callers
// independent of one another leave such a silence once in twenty gaps
// (e^-3); callers that each wait for their answer before they send again
// leave it as soon as all of them are in the batch, and waiting longer for
// them only stalls them all. It can end a wait only where the window is
// longer than three gaps, where batches gather several items anyway.
const quietGaps = 3

// sweepEvery is how many horizons a key's rate is kept after its last
// item: by then its count has faded to e^-10 of what it was.
const sweepEvery = 10

// rateHorizon returns the horizon of the rates under window.
func rateHorizon(window time.Duration) time.Duration {
	return max(minRateHorizon, horizonWindows*window)
}

// arrivals is a key's recent rate of items: a count that each item adds
// one to and that decays by e every horizon, so that at a steady rate of
// λ items a second it holds about λ·horizon (an exponentially weighted
// moving average, kept without a timer).
type arrivals struct {
	count float64   // as of at
	at    time.Time // the latest item
}

// add counts an item that came at now.
func (a *arrivals) add(now time.Time, horizon time.Duration) {
	a.count = a.recent(now, horizon) + 1
	a.at = now
}

// recent returns the count as of now.
func (a *arrivals) recent(now time.Time, horizon time.Duration) float64 {
	if a.count == 0 {
		return 0
	}
	return a.count * math.Exp(-float64(now.Sub(a.at))/float64(horizon))
}

// worthWaiting reports whether a batch with left of its window to go
// waits for more items, its key having brought recent items (the decayed
// count of arrivals) over horizon: whether, at that rate, left is
// expected to bring companyLikely more.
func worthWaiting(recent float64, horizon, left time.Duration) bool {
	return left > 0 && recent*float64(left)/float64(horizon) >= companyLikely
}

// quietAfter returns how long a key that brought recent items over
// horizon may go without one before its waiting batch goes: quietGaps
// mean gaps at that rate, or forever (a day) with no rate.
func quietAfter(recent float64, horizon time.Duration) time.Duration {
	if recent <= 0 {
		return 24 * time.Hour
	}
	return time.Duration(quietGaps * float64(horizon) / recent)
}
