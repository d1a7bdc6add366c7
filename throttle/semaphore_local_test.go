package throttle_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/fairq/fairq/throttle"
)

func TestLocalSemaphore(t *testing.T) {
	t.Parallel()
	type step struct {
		acquire int // limit to acquire with; 0 is no limit
		release int // index of a permit to release instead, 1-based
		want    bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"up to the limit", []step{{acquire: 2, want: true}, {acquire: 2, want: true}, {acquire: 2, want: false}}},
		{"a release frees a slot", []step{{acquire: 1, want: true}, {acquire: 1}, {release: 1}, {acquire: 1, want: true}}},
		{"a second release frees nothing more", []step{
			{acquire: 2, want: true}, {acquire: 2, want: true},
			{release: 1}, {release: 1},
			{acquire: 2, want: true}, {acquire: 2, want: false},
		}},
		{"no limit", []step{{acquire: 0, want: true}, {acquire: -1, want: true}, {acquire: 0, want: true}}},
		{"a lowered limit keeps holders, refuses newcomers", []step{
			{acquire: 3, want: true}, {acquire: 3, want: true}, {acquire: 3, want: true},
			{acquire: 1}, {release: 1}, {release: 2}, {acquire: 1}, {release: 3}, {acquire: 1, want: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := throttle.NewLocalSemaphore()
			var permits []throttle.Permit
			for i, st := range tt.steps {
				if st.release > 0 {
					permits[st.release-1].Release()
					continue
				}
				p, ok, err := s.TryAcquire(context.Background(), "k", st.acquire)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if ok != st.want {
					t.Fatalf("step %d: TryAcquire(limit %d) = %v, want %v", i, st.acquire, ok, st.want)
				}
				permits = append(permits, p)
			}
		})
	}
}

func TestLocalSemaphoreKeysAreApart(t *testing.T) {
	t.Parallel()
	s := throttle.NewLocalSemaphore()
	ctx := context.Background()
	if _, ok, _ := s.TryAcquire(ctx, "a", 1); !ok {
		t.Fatal("a refused")
	}
	p, ok, _ := s.TryAcquire(ctx, "b", 1)
	if !ok {
		t.Fatal("b refused while only a is full")
	}
	p.Release()
	if got := s.InUse("b"); got != 0 {
		t.Errorf("InUse(b) = %d after its release, want 0", got)
	}
	if got := s.InUse("a"); got != 1 {
		t.Errorf("InUse(a) = %d, want 1", got)
	}
}

func TestLocalSemaphoreConcurrent(t *testing.T) {
	t.Parallel()
	s := throttle.NewLocalSemaphore()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
	)
	for range 50 {
		wg.Go(func() {
			_, ok, err := s.TryAcquire(context.Background(), "k", 7)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if granted != 7 {
		t.Errorf("granted %d of 50 concurrent tries, want the limit of 7", granted)
	}
}

func TestLocalSemaphoreCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok, err := throttle.NewLocalSemaphore().TryAcquire(ctx, "k", 1); ok || err == nil {
		t.Errorf("TryAcquire with a cancelled context = %v, %v; want a refusal with an error", ok, err)
	}
}

func BenchmarkLocalSemaphore(b *testing.B) {
	s := throttle.NewLocalSemaphore()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, ok, err := s.TryAcquire(ctx, "tenant-a", 1<<30)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			p.Release()
		}
	})
}

func ExampleLocalSemaphore() {
	s := throttle.NewLocalSemaphore()
	ctx := context.Background()
	first, ok1, _ := s.TryAcquire(ctx, "acme", 2)
	_, ok2, _ := s.TryAcquire(ctx, "acme", 2)
	_, ok3, _ := s.TryAcquire(ctx, "acme", 2) // both slots taken
	fmt.Println(ok1, ok2, ok3)
	first.Release()
	_, ok4, _ := s.TryAcquire(ctx, "acme", 2)
	fmt.Println(ok4)
	// Output:
	// true true false
	// true
}
