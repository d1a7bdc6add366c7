package tenant

import (
	"fmt"
	"time"
)

// Duration is a time.Duration that JSON writes and reads as a Go duration
// string ("72h"), the way the YAML file writes it: the form of a tenant's
// duration limits in the admin API.
type Duration time.Duration

// MarshalText writes d as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration such as 30s or 72h.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a Go duration such as 30s or 72h", b)
	}
	*d = Duration(v)
	return nil
}
