package testenv

import (
	"bytes"
	"sync"
)

// LogBuffer is a bytes.Buffer safe for concurrent writes: the destination
// of a logger whose component writes from goroutines of its own, read by
// the test.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
