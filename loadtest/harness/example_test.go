package harness_test

import (
	"fmt"

	"github.com/fairq/fairq/loadtest/harness"
)

// The noisy-neighbour scenario: who sends what, and the modes it runs in.
func ExampleNewScenario() {
	sc, err := harness.NewScenario(harness.ScenarioNoisy, false)
	if err != nil {
		panic(err)
	}
	fmt.Println(sc.Title)
	for _, t := range sc.Tenants[len(sc.Tenants)-2:] {
		fmt.Printf("%s (%s): %v msg/s, %v each\n", t.ID, t.Role, t.Rate, t.Work)
	}
	fmt.Println(len(sc.Quiet()), "quiet tenants;", sc.Workers, "worker of", sc.Connections, "connections")
	for _, m := range harness.Modes {
		fmt.Printf("%s: %s\n", m, m.Title())
	}
	// Output:
	// Noisy neighbour: one tenant at 100× the others' rate
	// quiet-7 (quiet): 5 msg/s, 200ms each
	// noisy (noisy): 500 msg/s, 200ms each
	// 7 quiet tenants; 1 worker of 50 connections
	// single: one shared queue
	// shuffle: shuffle sharding only
	// full: full fairq
}
