// Package openapitest holds the gateway's answers to its OpenAPI document
// (gateway.OpenAPI) in tests: a Contract reports every answer whose
// status, content type, headers or body the document does not allow.
//
// Only tests may import it: its validator (pb33f/libopenapi-validator)
// must stay out of the fairq binary, and the gateway's fuzz-smoke build
// (tag fuzzsmoke) leaves it out too, since compiling the validator with
// the fuzzer's instrumentation takes minutes.
package openapitest
