package spillover_test

import (
	"context"
	"fmt"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
)

func ExampleLimiter() {
	rate, burst, concurrency := 100.0, 100, 2
	tenants, _ := tenant.New(tenant.Config{Tenants: []tenant.Spec{{
		ID:     "acme",
		Limits: tenant.Limits{ProcessRate: &rate, ProcessBurst: &burst, Concurrency: &concurrency},
	}}})
	// Without Redis: limits local to this worker.
	l, _ := spillover.New(spillover.Config{Tenants: tenants})
	show := func(v consumer.Verdict) {
		if v.Reason == "" {
			fmt.Println(v.Action)
			return
		}
		fmt.Println(v.Action, v.Reason)
	}
	var running []consumer.Verdict
	for range 3 {
		v, _ := l.Admit(context.Background(), &consumer.Message{Tenant: "acme"})
		show(v)
		if v.Action == consumer.Dispatch {
			running = append(running, v)
		}
	}
	running[0].Done() // a job ended: its slot is free
	v, _ := l.Admit(context.Background(), &consumer.Message{Tenant: "acme"})
	show(v)
	// Output:
	// dispatch
	// dispatch
	// spill concurrency
	// dispatch
}
