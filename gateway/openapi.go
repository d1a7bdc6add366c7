package gateway

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of the whole API, served at
// /openapi.json. TestOpenAPIMatchesRoutes fails when a route is in the
// router and not in the document, or the reverse.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the gateway's API.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	w.Write(openAPI)
}
