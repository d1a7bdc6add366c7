package config

import (
	"errors"
	"fmt"
)

// ErrInvalid is matched (with errors.Is) by every error about the content
// of a configuration: a syntax error, an unknown key, a value of the wrong
// type, a bad environment variable or a failed validation rule.
var ErrInvalid = errors.New("invalid configuration")

// KeyError is one problem with one key. Load, Parse and Validate return
// every problem they find, joined with errors.Join; errors.As finds the
// first.
type KeyError struct {
	// Key is the path of the key ("worker.push_url", "tenants[1].api_keys[0]"),
	// or the environment variable whose value is wrong
	// ("FAIRQ_WORKER_CONNECTIONS").
	Key string
	// Line is the line of the key in the file, or 0 when the problem is not
	// tied to a line (validation rules, the environment).
	Line int
	// Reason says what is wrong.
	Reason string
}

// Error formats the problem as "line 12: worker.push_url: reason".
func (e *KeyError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Key, e.Reason)
	}
	return e.Key + ": " + e.Reason
}

// Unwrap returns ErrInvalid.
func (e *KeyError) Unwrap() error { return ErrInvalid }

// problems collects KeyErrors.
type problems []error

func (p *problems) add(key string, line int, format string, args ...any) {
	*p = append(*p, &KeyError{Key: key, Line: line, Reason: fmt.Sprintf(format, args...)})
}

func (p problems) err() error { return errors.Join(p...) }
