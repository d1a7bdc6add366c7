package main

import (
	"fmt"
	"io"
)

// simMoved is what `fairq sim` says: the simulator is a command of its own,
// so that the server binary does not carry its plotting libraries. The
// command stays, so that a script that calls it learns where it went.
const simMoved = `fairq sim: the shuffle-sharding simulator is its own command, fairq-sim, with the same flags:
  go run ./cmd/fairq-sim [flags]         (fairq-sim -h lists them)
  go run ./cmd/fairq-sim sweep [flags]   (sizes a pool: N and k for a number of tenants)
`

// runSimMoved is `fairq sim`: it says where the simulator went and exits 2.
func runSimMoved(stderr io.Writer) int {
	fmt.Fprint(stderr, simMoved)
	return 2
}
