package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/gateway"
)

// TestOpenAPIMatchesRoutes: every route of the router (with every optional
// part turned on) is in the OpenAPI document, and every operation of the
// document is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	f := setup(t, withAdmin)
	var routes []string
	err := chi.Walk(f.srv.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		// The console's pages are HTML for browsers, not API operations:
		// the document leaves them out on purpose.
		if route == "/console" || strings.HasPrefix(route, "/console/") {
			return nil
		}
		routes = append(routes, method+" "+strings.TrimSuffix(route, "/"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(routes)

	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(gateway.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", doc.OpenAPI)
	}
	var documented []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(documented)
	if diff := cmp.Diff(documented, routes); diff != "" {
		t.Errorf("routes differ from openapi.json (-documented +routed):\n%s", diff)
	}
}

// TestOpenAPIServed: /openapi.json serves the document, to anyone.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.do(t, request{method: "GET", path: "/openapi.json"})
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != string(gateway.OpenAPI()) {
		t.Errorf("GET /openapi.json: %d %s", w.Code, w.Header())
	}
}

// TestOpenAPIReferences: every $ref of the document resolves.
func TestOpenAPIReferences(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(gateway.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var node any = doc
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, ok := node.(map[string]any)
					if !ok {
						node = nil
						break
					}
					node = m[part]
				}
				if node == nil {
					t.Errorf("unresolved $ref %s", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}
