package gateway

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/fairq/fairq/console"
)

// The operator console (package console) comes with the admin API: its
// page at /console/, and its session accepted by /admin/v1 in place of the
// bearer token on the console's own requests.

// newConsole returns the console of the admin token.
func (s *Server) newConsole() (*console.Console, error) {
	return console.New(console.Config{TokenSHA256: s.adminHash, Logger: s.log, Now: s.cfg.Now})
}

// mountConsole serves the console's page, script, style, login and
// logout. They are HTML, not API: openapi.json leaves them out.
func (s *Server) mountConsole(r chi.Router) {
	r.Mount("/console", s.console.Handler())
}

// consoleSession decides a request to the admin API that carries no
// bearer token: nil when it is the console's, with a valid session;
// otherwise what to answer. A session without the console's header is
// not asked for (401 as any request without a token); with the header
// but from another origin, it is refused (403), whatever the cookie.
func (s *Server) consoleSession(r *http.Request) *Error {
	err := s.console.Authorize(r)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, console.ErrNotConsole):
		return &Error{Code: CodeUnauthorized, Detail: "missing admin token: send Authorization: Bearer <token>"}
	case errors.Is(err, console.ErrCrossOrigin):
		return &Error{Code: CodeForbidden, Detail: "a console request must come from the console's own origin"}
	}
	return &Error{Code: CodeUnauthorized, Detail: "no valid console session (missing, expired, or signed under another admin token): log in again at " + console.Path}
}
