package config

import (
	"errors"
	"testing"
)

// problemsOf returns the KeyErrors of err, in order; it fails the test
// when err holds anything else.
func problemsOf(t *testing.T, err error) []*KeyError {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]*KeyError, 0, len(errs))
	for _, e := range errs {
		var ke *KeyError
		if !errors.As(e, &ke) {
			t.Fatalf("error %q is not a *KeyError", e)
		}
		out = append(out, ke)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(%q, ErrInvalid) = false", err)
	}
	return out
}

// keysOf returns the keys named by err's KeyErrors.
func keysOfErr(t *testing.T, err error) []string {
	t.Helper()
	var keys []string
	for _, ke := range problemsOf(t, err) {
		keys = append(keys, ke.Key)
	}
	return keys
}

// env returns a getenv over m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func ptr[T any](v T) *T { return &v }
