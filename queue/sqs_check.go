package queue

import "fmt"

// SQS checks a request as SQS would before sending it, with the same
// helpers Memory uses (checkBatch, checkEntry, validName, normalizeSpec), so
// that a bad entry costs no request and fails the same way on both backends.
// Whole-call faults (batch size, entry ids, total size) fail the call, as in
// SQS; faults of one entry fail only that entry. The queue's own
// MaximumMessageSize, which may be below MaxMessageSizeCap, is checked by
// SQS itself.

// sqsCheckIDs checks that batch entry ids are valid and distinct.
func sqsCheckIDs(entries []Entry) error {
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if !validName(e.ID, maxEntryID) {
			return fmt.Errorf("entry id %q: want 1-%d letters, digits, hyphens or underscores: %w", e.ID, maxEntryID, ErrInvalidEntry)
		}
		if seen[e.ID] {
			return fmt.Errorf("entry id %q repeated: %w", e.ID, ErrInvalidEntry)
		}
		seen[e.ID] = true
	}
	return nil
}

// sqsCheckReceive checks receive options.
func sqsCheckReceive(o ReceiveOptions) error {
	switch {
	case o.Max > MaxBatch:
		return fmt.Errorf("max %d: %w", o.Max, ErrTooManyEntries)
	case o.Max < 0:
		return fmt.Errorf("max %d is negative", o.Max)
	case o.Wait < 0 || o.Wait > MaxWait:
		return fmt.Errorf("wait %v is outside 0-%v", o.Wait, MaxWait)
	case o.Visibility < 0 || o.Visibility > MaxVisibility:
		return fmt.Errorf("visibility %v is outside 0-%v", o.Visibility, MaxVisibility)
	}
	return nil
}
