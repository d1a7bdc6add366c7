package harness

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// burstMax is the longest burst of Burn: about the time a gateway or a
// worker runs for one request before it waits again.
const burstMax = 250 * time.Microsecond

// Burn burns cores of the machine's CPU (0.7 is seven tenths of one core)
// until ctx ends, and returns the CPU time it burnt. It spreads them over
// one thread per core, each burning in bursts of at most burstMax and
// sleeping between them, and keeping to its share by its own CPU time, not
// the wall clock: a sleep that runs long is made up for, and a thread that
// waits for a core burns no more than its share once it has one. So, on a
// busy machine, it takes what any process of its priority would get, and
// never more than it is asked.
//
// It is the contention control's load (Options.Burn): work that shares
// nothing with fairq (no socket, queue, lock or file), only the cores.
// Where a thread's CPU time cannot be read (not Linux) it counts the
// bursts' wall-clock time instead.
func Burn(ctx context.Context, cores float64) time.Duration {
	threads := runtime.NumCPU()
	share := cores / float64(threads)
	if share <= 0 {
		<-ctx.Done()
		return 0
	}
	var (
		mu    sync.Mutex
		total time.Duration
		wg    sync.WaitGroup
	)
	for range threads {
		wg.Go(func() {
			burnt := burnShare(ctx, share)
			mu.Lock()
			total += burnt
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

// burnShare burns share of one core on a thread of its own until ctx ends
// and returns the CPU time it burnt.
func burnShare(ctx context.Context, share float64) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	read, ok := threadCPU()
	var spun time.Duration
	used := func() time.Duration {
		if ok {
			return read()
		}
		return spun
	}
	start, c0 := time.Now(), used()
	for ctx.Err() == nil {
		owed := time.Duration(share*float64(time.Since(start))) - (used() - c0)
		if owed <= 0 {
			// Sleep about as long as a burst lasts at this share.
			time.Sleep(time.Duration(float64(burstMax) / share))
			continue
		}
		d := min(owed, burstMax)
		spin(d)
		spun += d
	}
	return used() - c0
}

// spin keeps the processor busy for d.
func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}
