package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/gateway/gatewaytest"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
)

func ExampleNew() {
	ctx := context.Background()
	backend := queue.NewMemory(queue.MemoryConfig{})
	names := queue.PoolNames("fairq", 2)
	for _, n := range names.All() {
		backend.Create(ctx, queue.Spec{Name: n})
	}
	tenants, _ := tenant.New(tenant.Config{Tenants: []tenant.Spec{
		{ID: "acme", APIKeys: []string{tenant.HashKey("acme-key")}},
	}})
	srv, err := gateway.New(gateway.Config{
		Backend: backend,
		Names:   names,
		Picker:  gatewaytest.NewRoundRobin(len(names.Live)), // sharding.Tracker in production
		Tenants: tenants,
	})
	if err != nil {
		panic(err)
	}
	srv.Start(ctx)
	defer srv.Stop(ctx) // after http.Server.Shutdown

	req := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(`{"body":"hello","attributes":{"kind":"greeting"}}`))
	req.Header.Set("Authorization", "Bearer acme-key")
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)

	var answer struct{ Tenant, Queue string }
	json.Unmarshal(w.Body.Bytes(), &answer)
	fmt.Println(w.Code, answer.Tenant, answer.Queue)
	// Output: 202 acme fairq-live-00
}
