package sharding

import (
	"encoding/json"
	"fmt"
	"slices"
)

// reading is one poll of the depths of the pool's queues: what a tracker
// adopts, and the value it shares through Redis.
type reading struct {
	At     int64    `json:"at"` // unix milliseconds when the poll started
	Queues []string `json:"queues"`
	Depths []int64  `json:"depths"` // visible + not visible, by queue
}

// TakenAt is when the poll started, in unix milliseconds.
func (r reading) TakenAt() int64 { return r.At }

func (r reading) encode() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // cannot happen: strings and integers
	}
	return string(b)
}

// decodeReading parses a shared reading and checks that it is of these
// queues.
func decodeReading(s string, queues []string) (reading, error) {
	var r reading
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return reading{}, fmt.Errorf("decode shared reading: %w", err)
	}
	if !slices.Equal(r.Queues, queues) || len(r.Depths) != len(queues) {
		return reading{}, fmt.Errorf("shared reading is of queues %q, not of this pool", r.Queues)
	}
	return r, nil
}
