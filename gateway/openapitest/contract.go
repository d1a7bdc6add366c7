package openapitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
)

// Contract holds the gateway's answers to its OpenAPI document
// (gateway.OpenAPI), so that a test fails when a handler answers a status
// its operation does not document, a content type the response does not
// list, a header the response does not declare, or a body its schema does
// not allow. Schemas are read closed: a field the document does not name
// is a departure too, although the document leaves its objects open so
// that clients accept fields added later. Maps (objects whose
// additionalProperties is a schema) take any key. It is safe for
// concurrent use; build one per test binary, since compiling the
// document's schemas takes a while.
type Contract struct {
	v validator.Validator
}

// NewContract builds a Contract from an OpenAPI 3.1 document, which must
// itself be valid.
func NewContract(doc []byte) (*Contract, error) {
	closed, err := closeObjects(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	d, err := libopenapi.NewDocument(closed)
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	// Strict mode reports undeclared headers. Its check of bodies would
	// report every key of a map as undeclared, so it is left to the
	// closed schemas, which JSON Schema itself holds bodies to.
	v, errs := validator.NewValidator(d, config.WithStrictMode(), config.WithStrictIgnorePaths("$.body", "$.body.**"))
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapi document: %w", errors.Join(errs...))
	}
	if ok, problems := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapi document is not valid OpenAPI: %s", describe(problems))
	}
	return &Contract{v: v}, nil
}

// Check returns how res, the answer to req, departs from the document,
// one line per problem; none for an answer that keeps to it. An answer to
// a request that is no operation of the document (an unknown path, or a
// method the path does not have) is not checked: there is nothing to
// check it against. res.Body is read and replaced by an equal one.
func (c *Contract) Check(req *http.Request, res *http.Response) []string {
	if res.Body != nil {
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return []string{fmt.Sprintf("%s %s: reading the %d answer: %v", req.Method, req.URL.Path, res.StatusCode, err)}
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
		defer func() { res.Body = io.NopCloser(bytes.NewReader(body)) }()
	}
	ok, problems := c.v.ValidateHttpResponse(req, res)
	if ok {
		return nil
	}
	var out []string
	for _, p := range problems {
		if p.IsPathMissingError() || p.IsOperationMissingError() {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s → %d: %s", req.Method, req.URL.Path, res.StatusCode, describe([]*verrors.ValidationError{p})))
	}
	return out
}

// closeObjects returns doc with additionalProperties: false on every
// object schema that names its properties and says nothing of others.
// Schemas that combine others (allOf, anyOf, oneOf) are left as they are,
// since closing their parts would refuse each other's properties.
func closeObjects(doc []byte) ([]byte, error) {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			_, props := v["properties"].(map[string]any)
			_, open := v["additionalProperties"]
			_, allOf := v["allOf"]
			_, anyOf := v["anyOf"]
			_, oneOf := v["oneOf"]
			if props && !open && !allOf && !anyOf && !oneOf {
				v["additionalProperties"] = false
			}
			for _, child := range v {
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(root)
	return json.Marshal(root)
}

// describe renders validation errors with their schema failures.
func describe(problems []*verrors.ValidationError) string {
	var b strings.Builder
	for i, p := range problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Message)
		if p.Reason != "" && p.Reason != p.Message {
			b.WriteString(": " + p.Reason)
		}
		for _, f := range p.SchemaValidationErrors {
			b.WriteString(" [" + f.Reason)
			if f.FieldPath != "" {
				b.WriteString(" at " + f.FieldPath)
			}
			b.WriteString("]")
		}
	}
	return b.String()
}
