//go:build race

package harness

// raceEnabled: the smoke tests build fairq with the race detector too, so
// that a data race under load fails them.
const raceEnabled = true
