//go:build fuzzsmoke

package gateway_test

import (
	"net/http"
	"testing"
)

// The fuzz smoke (make fuzz-smoke, tag fuzzsmoke) runs the fuzz targets
// alone: it leaves the OpenAPI contract out, whose validator takes minutes
// to compile with the fuzzer's instrumentation. The API tests that hold
// answers to the document run without the tag.

func prepareContract(testing.TB) {}

func keepsContract(testing.TB, *http.Request, *http.Response) {}
