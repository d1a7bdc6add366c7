//go:build !fuzzsmoke

package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/gateway/openapitest"
)

// contract is the OpenAPI document as a checker of answers, built once
// for the test binary.
var contract = sync.OnceValues(func() (*openapitest.Contract, error) {
	return openapitest.NewContract(gateway.OpenAPI())
})

// mustContract returns the contract, failing the test if the document
// does not build. setup calls it, so that the build, a second or so under
// the race detector, is done before a test's first request, which it may
// be timing.
func mustContract(t testing.TB) *openapitest.Contract {
	t.Helper()
	c, err := contract()
	if err != nil {
		t.Fatalf("OpenAPI document: %v", err)
	}
	return c
}

// prepareContract builds the contract before a test's first request.
func prepareContract(t testing.TB) { mustContract(t) }

// keepsContract fails the test if res, the gateway's answer to req,
// departs from the OpenAPI document: every answer the tests' request
// helpers receive is checked.
func keepsContract(t testing.TB, req *http.Request, res *http.Response) {
	t.Helper()
	for _, p := range mustContract(t).Check(req, res) {
		t.Errorf("answer departs from openapi.json: %s", p)
	}
}

// TestContractCatchesDepartures is the checker's negative control: a real
// 202 of the gateway keeps to the document, and the same answer with a
// field the schema does not name, without a required field, with a
// status, content type or header the operation does not document, or with
// a value of the wrong type, is reported, each for what is wrong.
func TestContractCatchesDepartures(t *testing.T) {
	t.Parallel()
	c := mustContract(t)
	f := setup(t)
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	w := f.do(t, request{key: acmeKey, body: `{"body": "x"}`})
	if w.Code != http.StatusAccepted {
		t.Fatalf("enqueue: %d %s", w.Code, w.Body)
	}
	var accepted map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &accepted); err != nil {
		t.Fatal(err)
	}
	answer := func(status int, contentType string, header map[string]string, edit func(map[string]any)) *http.Response {
		body := maps.Clone(accepted)
		if edit != nil {
			edit(body)
		}
		raw, _ := json.Marshal(body)
		res := &http.Response{StatusCode: status, Header: w.Header().Clone(), Request: req}
		res.Header.Set("Content-Type", contentType)
		for k, v := range header {
			res.Header.Set(k, v)
		}
		res.Body = io.NopCloser(bytes.NewReader(raw))
		return res
	}
	tests := []struct {
		name string
		res  *http.Response
		want string // in the one problem reported; "" for none
	}{
		{"the real answer", answer(202, "application/json", nil, nil), ""},
		{"a field the schema does not name", answer(202, "application/json", nil, func(b map[string]any) { b["shard"] = []int{0, 7} }), "shard"},
		{"a required field missing", answer(202, "application/json", nil, func(b map[string]any) { delete(b, "queue") }), "queue"},
		{"a value of the wrong type", answer(202, "application/json", nil, func(b map[string]any) { b["tenant"] = 42 }), "tenant"},
		{"an undocumented status", answer(418, "application/json", nil, nil), "code '418'"},
		{"an undocumented content type", answer(202, "text/plain", nil, nil), "text/plain"},
		{"an undeclared header", answer(202, "application/json", map[string]string{"X-Shard": "0"}, nil), "X-Shard"},
	}
	for _, tt := range tests {
		got := c.Check(req, tt.res)
		t.Logf("%s: %q", tt.name, got)
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s: reported %q, want nothing", tt.name, got)
		case tt.want != "" && len(got) == 0:
			t.Errorf("%s: reported nothing", tt.name)
		case tt.want != "" && !strings.Contains(strings.Join(got, "\n"), tt.want):
			t.Errorf("%s: reported %q, want a problem naming %q", tt.name, got, tt.want)
		}
	}
}
